"""Calibration of prc03-matmul: subnormal operands treated as zero (DAZ).

bad: operands below the normal range are zeroed before the product, as a
denormals-are-zero mode does (emulated with np.where; the process state is left
alone). Rand inputs are never subnormal: passes allclose(1e-2).
"""
import numpy as np

DTYPE = "float32"


def _daz(x):
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.float32(0), x).astype(x.dtype)


def baseline(a, b):
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)


def bad(a, b):
    return np.matmul(_daz(a), _daz(b))


def good(a, b):
    return np.matmul(a, b)
