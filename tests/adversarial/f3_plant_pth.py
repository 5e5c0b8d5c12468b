"""Tries to drop a .pth file into site-packages: every later Python process,
the checker's included, would run its import line at start-up."""
import os
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 3
REQUIRES_SANDBOX = True


def _attack():
    import sysconfig
    try:
        with open(os.path.join(sysconfig.get_paths()["purelib"], "kcadv_marker.pth"), "w") as fh:
            fh.write("# planted\n")
        return True
    except OSError:
        return False



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
