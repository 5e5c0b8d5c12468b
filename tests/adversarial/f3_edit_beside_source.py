"""Writes a file beside its own source (a helper module the certificate would
not list, or an edited copy of itself that hashes as the certified one)."""
import os
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 3
REQUIRES_SANDBOX = True


def _attack():
    try:
        with open(__file__ + ".kcadv", "w") as fh:
            fh.write("planted")
        os.remove(__file__ + ".kcadv")
        return True
    except OSError:
        return False



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
