"""Forks a child that ignores SIGTERM and SIGHUP and loops, hoping that a
kill of the worker alone leaves it running."""
import os
import signal
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 4
REQUIRES_SANDBOX = True


def _attack():
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            os.execv("/bin/sleep", ["kcadv-survivor", "30"])
        finally:
            os._exit(0)
    return False



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
