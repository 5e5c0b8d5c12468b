"""Calibration of prc03-gelu: subnormal results flushed to zero (FTZ).

bad: gelu evaluated correctly, then results below float32's normal range written as
zero (a flush-to-zero store). Passes allclose(1e-2) on rand inputs.
"""
import math

import numpy as np

DTYPE = "float32"
_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu64(x):
    p = np.asarray(x, dtype=np.float64)
    return 0.5 * p * (1.0 + _erf(p / math.sqrt(2.0)).astype(np.float64))


def baseline(x):
    return np.zeros_like(x)


def bad(x):
    y = _gelu64(x).astype(np.float32)
    return np.where(np.abs(y) < np.finfo(np.float32).tiny, np.float32(0), y).astype(x.dtype)


def good(x):
    return _gelu64(x).astype(x.dtype)
