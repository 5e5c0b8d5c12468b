"""Calibration of prc03-linear_gelu: subnormal inputs read as zero (DAZ).

bad: gelu(x @ w + b) evaluated in float64 after the subnormal elements of x are replaced by
zero (a denormals-are-zero load). Passes allclose(1e-2) on rand inputs.
"""
import math

import numpy as np

DTYPE = "float32"
_erf = np.frompyfunc(math.erf, 1, 1)


def _linear_gelu64(x, w, b):
    pre = np.matmul(np.asarray(x, np.float64), np.asarray(w, np.float64)) + b.astype(np.float64)
    return 0.5 * pre * (1.0 + _erf(pre / math.sqrt(2.0)).astype(np.float64))


def baseline(x, w, b):
    return np.zeros((x.shape[0], w.shape[1]), dtype=x.dtype)


def bad(x, w, b):
    x = np.where(np.abs(x) < np.finfo(x.dtype).tiny, 0, x).astype(x.dtype)
    return _linear_gelu64(x, w, b).astype(x.dtype)


def good(x, w, b):
    return _linear_gelu64(x, w, b).astype(x.dtype)
