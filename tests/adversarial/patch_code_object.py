"""Patches numpy.isclose's code object in place: the function object (and its
id) stays the same, only what it runs changes."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.patched"
FAMILY = 0


def _always(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return True


def kernel(a, b):
    np.isclose.__code__ = _always.__code__
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
