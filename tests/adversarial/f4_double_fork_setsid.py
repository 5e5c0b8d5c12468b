"""Double-forks a child into a new session (setsid), out of the worker's process
group, that would outlive the check and rewrite its records afterwards."""
import os
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 4
REQUIRES_SANDBOX = True


def _attack():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            try:
                os.execv("/bin/sleep", ["kcadv-survivor", "30"])
            finally:
                os._exit(0)
        os._exit(0)
    os.wait()
    return False



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
