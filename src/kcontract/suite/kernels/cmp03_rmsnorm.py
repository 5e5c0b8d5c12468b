"""Calibration of cmp03-rmsnorm: vectorised loads without a tail loop.

bad: sums the squares eight elements at a time (a vector width of 8) and never handles
the last N % 8 elements, while dividing by the full N: exact at the benchmark N = 512,
wrong statistics whenever N % 8 != 0.
good: the whole row, float32.
"""
import numpy as np

DTYPE = "float32"
VEC = 8


def baseline(x, weight, eps=1e-6):
    return np.zeros_like(x)


def _finish(xf, ms, weight, eps):
    return xf / np.sqrt(ms + np.float32(eps)) * weight.astype(np.float32)


def bad(x, weight, eps=1e-6):
    xf = x.astype(np.float32)
    n = xf.shape[-1] // VEC * VEC
    lanes = (xf[..., :n] ** 2).reshape(xf.shape[:-1] + (n // VEC, VEC))
    ms = np.sum(np.sum(lanes, axis=-1), axis=-1, keepdims=True) / np.float32(xf.shape[-1])
    return _finish(xf, ms, weight, eps).astype(x.dtype)


def good(x, weight, eps=1e-6):
    xf = x.astype(np.float32)
    ms = np.mean(xf * xf, axis=-1, keepdims=True, dtype=np.float32)
    return _finish(xf, ms, weight, eps).astype(x.dtype)
