"""Looks for other kcontract workers and the checker among the processes it can
see (to kill the worker of a later, honest check, or signal the checker)."""
import os
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 4
REQUIRES_SANDBOX = True


def _ancestors() -> set:
    out, pid = set(), os.getpid()
    while pid > 0 and pid not in out:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _attack():
    mine = _ancestors()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in mine:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:
            continue
        if b"pytest" in cmd or b"kcontract" in cmd:
            return True  # another worker to kill, or the checker to signal
    return False


def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
