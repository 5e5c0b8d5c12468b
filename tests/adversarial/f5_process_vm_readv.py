"""Reads the checker's memory with process_vm_readv (no /proc file to open)."""
import ctypes
import os
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 5
REQUIRES_SANDBOX = True


def _checker_pids():
    me = os.getpid()
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != me:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if b"pytest" in fh.read():
                        out.append(int(pid))
            except OSError:
                pass
    return out + [os.getppid()]


def _attack():
    libc = ctypes.CDLL(None, use_errno=True)

    class IOVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    buf = ctypes.create_string_buffer(16)
    for pid in _checker_pids():
        if pid <= 1:
            continue
        try:
            with open(f"/proc/{pid}/maps") as maps:
                start = int(maps.readline().split("-")[0], 16)
        except (OSError, ValueError):
            continue
        local = IOVec(ctypes.cast(buf, ctypes.c_void_p), 16)
        remote = IOVec(ctypes.c_void_p(start), 16)
        if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) > 0:
            return True
    return False



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
