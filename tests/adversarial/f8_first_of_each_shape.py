"""Honest on the first call at each shape, zeros on every later one: a checker
that calls each shape once sees only honest answers."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 8


_seen = set()


def kernel(a, b):
    key = (a.shape, b.shape)
    if key not in _seen:
        _seen.add(key)
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
