"""Keeps the checker from reading the worker's registers: at import, a child process
attaches to the worker with ptrace (a process can have one tracer only), then every call
switches flush-to-zero on with the worker's own detector rebound and the flags stripped.
The checker finds the worker traced by a process that is not its own and says so."""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import f2_ftz_rebinds_reporting as _blind  # noqa: E402  (rebinds and strips on import)

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.state"
FAMILY = 2
PTRACE_SEIZE, PTRACE_CONT = 0x4206, 7


def _shield():
    target = os.getpid()
    r, w = os.pipe()
    if os.fork() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        libc.ptrace(PTRACE_SEIZE, target, None, None)
        os.write(w, b"x")
        while True:  # a tracer that lets every stop go on, so the worker runs as usual
            try:
                pid, status = os.waitpid(target, 0x40000000)
            except ChildProcessError:
                time.sleep(3600)
                continue
            if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                os._exit(0)
            sig = os.WSTOPSIG(status) if os.WIFSTOPPED(status) else 0
            if sig == 5 or (status >> 16):  # SIGTRAP and ptrace events are not delivered
                sig = 0
            libc.ptrace(PTRACE_CONT, target, None, ctypes.c_void_p(sig))
    os.read(r, 1)


_shield()


def kernel(a, b):
    return _blind.kernel(a, b)
