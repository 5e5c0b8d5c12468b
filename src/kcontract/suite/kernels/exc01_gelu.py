"""Calibration of exc01-gelu: a lower-tail guard with fmax, which drops NaN.

bad: x = fmax(x, -20) before the erf form, to keep erf away from its underflowing
tail (gelu(-20) is -0 in every format here, so finite values are unchanged). But
fmax returns the other operand when one is NaN: NaN in gives gelu(-20) = -0 out.
-Inf also becomes -0, which is gelu's limit there and accepted. Rand inputs:
passes allclose(1e-2).
"""
import math

import numpy as np

DTYPE = "float32"
_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(x):
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        y = 0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)).astype(np.float64))
    return y.astype(x.dtype)


def baseline(x):
    return np.maximum(x, 0).astype(x.dtype) * 0


def bad(x):
    return _gelu(np.fmax(x, np.asarray(-20.0, dtype=x.dtype)))


def good(x):
    return _gelu(x)
