"""The worker's floating-point control state, read by the checker itself (ptrace).

Flush-to-zero, denormals-are-zero and the rounding mode are per-thread CPU registers
(MXCSR and the x87 control word on x86-64, FPCR on AArch64).  The worker can report
them, but the kernel owns the worker's code and can rebind what reports them; this
module reads them from the parent instead: a thread of the worker (the checker reads the
calling thread, whose state the kernel's callers share) is attached with
``PTRACE_SEIZE``, stopped with ``PTRACE_INTERRUPT``, its floating-point registers read
(``PTRACE_GETFPREGS`` / ``PTRACE_GETREGSET`` with ``NT_PRFPREG``) and released, at a
moment when the worker waits for the checker's next request.  Only the control bits
are compared (the sticky exception flags change with any arithmetic).

Reading needs ptrace rights over the worker (the checker is root, or the worker is its
own child and ``kernel.yama.ptrace_scope`` allows it); where it cannot read,
:func:`read_threads` returns None and the caller falls back to the worker's report.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
from typing import Optional, Sequence

PTRACE_GETFPREGS = 14
PTRACE_DETACH = 17
PTRACE_GETREGSET = 0x4204
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
NT_PRFPREG = 2
WALL = 0x40000000

MACHINE = platform.machine().lower()
#: per architecture: (size of the register block, [(name, byte offset, width, control
#: mask, value at process start)])
LAYOUTS = {
    # user_fpregs_struct: cwd (u16) at 0, mxcsr (u32) at 24.  MXCSR: DAZ bit 6,
    # exception masks 7-12, rounding 13-14, FTZ 15; x87: precision 8-9, rounding 10-11
    "x86_64": (512, [("mxcsr", 24, 4, 0xFFC0, 0x1F80), ("x87", 0, 2, 0x0F3F, 0x037F)]),
    # user_fpsimd_state: 32 q registers, fpsr (u32) at 512, fpcr (u32) at 516.
    # FPCR: FZ16 bit 19, rounding 22-23, FZ 24, DN 25
    "aarch64": (528, [("fpcr", 516, 4, (1 << 19) | (3 << 22) | (1 << 24) | (1 << 25), 0)]),
}
LAYOUTS["amd64"] = LAYOUTS["x86_64"]
LAYOUTS["arm64"] = LAYOUTS["aarch64"]

_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        lib = ctypes.CDLL(None, use_errno=True)
        lib.ptrace.restype = ctypes.c_long
        lib.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        _LIBC = lib
    return _LIBC


class _IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def supported() -> bool:
    return os.name == "posix" and platform.system() == "Linux" and MACHINE in LAYOUTS


def _read_thread(tid: int) -> Optional[dict]:
    """The control registers of one thread, or None (gone, or no ptrace rights)."""
    lib = _libc()
    size, fields = LAYOUTS[MACHINE]
    if lib.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
        return None
    try:
        if lib.ptrace(PTRACE_INTERRUPT, tid, None, None) != 0:
            return None
        status = ctypes.c_int(0)
        while True:
            r = lib.waitpid(tid, ctypes.byref(status), WALL)
            if r == tid:
                break
            if r == -1 and ctypes.get_errno() == errno.EINTR:
                continue
            return None
        if (status.value & 0xFF) != 0x7F:  # exited or killed, not stopped
            return None
        buf = ctypes.create_string_buffer(size)
        if MACHINE in ("x86_64", "amd64"):
            ok = lib.ptrace(PTRACE_GETFPREGS, tid, None, buf) == 0
        else:
            iov = _IOVec(ctypes.cast(buf, ctypes.c_void_p), size)
            ok = lib.ptrace(PTRACE_GETREGSET, tid, ctypes.c_void_p(NT_PRFPREG),
                            ctypes.byref(iov)) == 0
        if not ok:
            return None
        raw = buf.raw
        return {name: int.from_bytes(raw[off:off + width], "little")
                for name, off, width, _, _ in fields}
    finally:
        lib.ptrace(PTRACE_DETACH, tid, None, None)


def read_threads(pid: int, only: Optional[Sequence[int]] = None) -> Optional[dict]:
    """``{tid: {register: value}}`` for every thread of process ``pid`` (or for the threads
    ``only`` names), or None when this process cannot read them (unsupported platform, no
    rights, the process is gone)."""
    if not supported():
        return None
    if only is not None:
        tids = sorted(only)
    else:
        tids = sorted(_tasks(pid))
    out = {}
    for tid in tids:
        regs = _read_thread(tid)
        if regs is not None:
            out[tid] = regs
    if pid not in out:  # the main thread must be readable, or nothing is known
        return None
    return out


def changed(threads: dict) -> list:
    """Descriptions of the control registers that differ from their value at process start
    (``["mxcsr=0x9fa0 in thread 123 (flush-to-zero)"]``)."""
    _, fields = LAYOUTS[MACHINE]
    out = []
    for tid, regs in sorted(threads.items()):
        for name, _, _, mask, start in fields:
            value = regs.get(name)
            if value is not None and (value & mask) != (start & mask):
                out.append(f"{name}={value:#x} in thread {tid}{_explain(name, value)}")
    return out


def _explain(name: str, value: int) -> str:
    what = []
    if name == "mxcsr":
        if value & (1 << 15):
            what.append("flush-to-zero")
        if value & (1 << 6):
            what.append("denormals-are-zero")
        if (value >> 13) & 3:
            what.append("rounding mode")
        if (value >> 7) & 0x3F != 0x3F:
            what.append("exceptions unmasked")
    elif name == "x87":
        if (value >> 10) & 3:
            what.append("rounding mode")
        if (value >> 8) & 3 != 3:
            what.append("precision")
    elif name == "fpcr":
        if value & (1 << 24):
            what.append("flush-to-zero")
        if value & (1 << 19):
            what.append("half-precision flush-to-zero")
        if (value >> 22) & 3:
            what.append("rounding mode")
        if value & (1 << 25):
            what.append("default NaN")
    return f" ({', '.join(what)})" if what else ""


def _status(pid: int, key: str) -> list:
    """The fields of line ``key:`` of ``/proc/<pid>/status`` ([] when there is none)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return line.split()[1:]
    except OSError:
        pass
    return []


def tracer(pid: int) -> int:
    """The pid of the process tracing ``pid`` (0: none), from ``/proc/<pid>/status``."""
    field = _status(pid, "TracerPid")
    return int(field[0]) if field and field[0].isdigit() else 0


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``ancestor`` is ``pid`` or one of its ancestors (``/proc/<pid>/stat``)."""
    for _ in range(256):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def worker_pid(outer: int, sandboxed: bool) -> Optional[int]:
    """The host pid of the worker's Python process.  Unsandboxed it is ``outer`` itself;
    under bubblewrap (``outer`` its pid) it is the process that is pid 2 of the sandbox's
    PID namespace (bubblewrap is pid 1; pid 2 is the first process it starts, and pids
    are not reused while the namespace lives), found among ``outer``'s descendants."""
    if not sandboxed:
        return outer
    frontier, seen = [outer], set()
    while frontier:
        pid = frontier.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for tid in _tasks(pid):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except OSError:
                kids = []
            for k in kids:
                ns = _nspid(k)
                if len(ns) >= 2 and ns[-1] == 2:
                    return k
                frontier.append(k)
        if len(seen) > 64:
            break
    return None


def _tasks(pid: int) -> list:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit()]
    except OSError:
        return []


def _nspid(pid: int) -> list:
    try:
        return [int(v) for v in _status(pid, "NSpid")]
    except ValueError:
        return []
