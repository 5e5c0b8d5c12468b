"""Calibration of cmp03-gelu: flat chunks of 8 elements without a tail.

bad: treats the input as one flat array processed 8 elements per step and never writes
the last R*N % 8 elements (left zero). Exact at the benchmarked 16 x 1024; wrong whenever
the element count is not a multiple of 8.
good: every element, erf form, rounded once.
"""
import math

import numpy as np

DTYPE = "float32"
VEC = 8
_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(x):
    x64 = np.asarray(x, dtype=np.float64)
    return 0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)).astype(np.float64))


def baseline(x):
    return np.zeros_like(x)


def bad(x):
    flat = x.reshape(-1)
    n = flat.size // VEC * VEC
    out = np.zeros(flat.size, dtype=x.dtype)
    out[:n] = _gelu(flat[:n]).astype(x.dtype)
    return out.reshape(x.shape)


def good(x):
    return _gelu(x).astype(x.dtype)
