"""Calibration of cmp01-linear_gelu: a fused linear+GELU whose product runs in bfloat16.

bad: the fused kernel feeds x and w to the product as bfloat16 (a tensor-core path the
fusion picked), accumulates in float32, then adds b and applies the erf GELU in float32.
Relative error ~2^-9 per operand: passes allclose(1e-2), far outside the composed
tolerance of the float32 unfused composition.
good: float32 product, bias and erf GELU, rounded once.
"""
import math

import ml_dtypes
import numpy as np

DTYPE = "float32"
_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(pre):
    p = np.asarray(pre, dtype=np.float64)
    return 0.5 * p * (1.0 + _erf(p / math.sqrt(2.0)).astype(np.float64))


def baseline(x, w, b):
    return np.zeros((x.shape[0], w.shape[1]), dtype=x.dtype)


def bad(x, w, b):
    xb = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    wb = w.astype(ml_dtypes.bfloat16).astype(np.float32)
    pre = np.matmul(xb, wb) + b.astype(np.float32)
    return _gelu(pre).astype(x.dtype)


def good(x, w, b):
    pre = np.matmul(x.astype(np.float32), w.astype(np.float32)) + b.astype(np.float32)
    return _gelu(pre).astype(x.dtype)
