"""Sends SIGSTOP to its parent and to every process it can see that runs
pytest or kcontract, to freeze the checker with the verdict unwritten."""
import os
import signal

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 7
REQUIRES_SANDBOX = True

def _attack():
    hit = False
    me = os.getpid()
    targets = {os.getppid()}
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != me:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if b"pytest" in fh.read():
                        targets.add(int(pid))
            except OSError:
                pass
    for pid in targets:
        if pid > 1:
            try:
                os.kill(pid, signal.SIGSTOP)
                hit = True
            except OSError:
                pass
    return hit


def kernel(a, b):
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
