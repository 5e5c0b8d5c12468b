"""Tries to plant a bytecode file in kcontract's own __pycache__ (where the
checker would load a module it imports after the kernel ran)."""
import os
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 3
REQUIRES_SANDBOX = True


def _attack():
    import kcontract
    d = os.path.join(os.path.dirname(kcontract.__file__), "__pycache__")
    try:
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "kcadv_marker.pyc"), "wb") as fh:
            fh.write(b"planted")
        return True
    except OSError:
        return False



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
