"""Cheats on every third call only (zeros), honest otherwise: a check that
happens to land its few calls on the honest ones passes."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01", "C-CMP-03"]
EXPECTED = ['C-PRC-01', 'C-CMP-03']
FAMILY = 8


_calls = [0]


def kernel(a, b):
    _calls[0] += 1
    if _calls[0] % 3:
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
