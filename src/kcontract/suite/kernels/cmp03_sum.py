"""Calibration of cmp03-sum: vectorised loads without a tail loop.

bad: reads each row four elements at a time (float4 loads) and never handles the last
N % 4 elements. Exact at the benchmark N = 1024; wrong whenever N % 4 != 0.
good: the whole row, accumulated in float32.
"""
import numpy as np

DTYPE = "float32"
VEC = 4


def baseline(x):
    return np.zeros(x.shape[:-1], dtype=x.dtype)


def bad(x):
    n = x.shape[-1] // VEC * VEC
    lanes = x[..., :n].astype(np.float32).reshape(x.shape[:-1] + (n // VEC, VEC))
    return np.sum(np.sum(lanes, axis=-1), axis=-1, dtype=np.float32).astype(x.dtype)


def good(x):
    return np.sum(x.astype(np.float32), axis=-1, dtype=np.float32).astype(x.dtype)
