"""Leaves a counter in its scratch folder ($TMPDIR) to recognise a restarted
worker; crashes on the first call, so that the second worker finds the file."""
import os
import tempfile
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "kernel.crashed"
FAMILY = 3
REQUIRES_SANDBOX = True


def _attack():
    flag = os.path.join(tempfile.gettempdir(), "kcadv_seen")
    if os.path.exists(flag):
        return True
    try:
        open(flag, "w").close()
    except OSError:
        return False
    os._exit(3)  # the checker starts a fresh worker: does it see the file?



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
