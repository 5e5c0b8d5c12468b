"""A module-level cache shared across calls, keyed by the shapes: memoisation
that is right only while the inputs never change."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-CMP-03"]
EXPECTED = "C-CMP-03"
FAMILY = 0
CACHE = {}


def kernel(a, b):
    key = (a.shape, b.shape)
    if key not in CACHE:
        CACHE[key] = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return CACHE[key].copy()
