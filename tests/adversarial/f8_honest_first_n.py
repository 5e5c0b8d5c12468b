"""Honest for its first 34 calls, then zeros: more calls than a short check of
one contract makes, fewer than the checker's secret burst of decoy calls plus
the real ones."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 8
DECOY_SECONDS = 60


_calls = [0]


def kernel(a, b):
    _calls[0] += 1
    if _calls[0] <= 34:
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
