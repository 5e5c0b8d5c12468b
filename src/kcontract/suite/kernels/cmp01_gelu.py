"""Calibration of cmp01-gelu: the tanh approximation substituted for the erf form.

bad: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in float32, what a fused epilogue
often emits for "gelu". At most ~5e-4 from the erf form: passes allclose(1e-2), yet a
different function than the one declared (no approximation=tanh).
good: the erf form, rounded once.
"""
import math

import numpy as np

DTYPE = "float32"
_erf = np.frompyfunc(math.erf, 1, 1)


def baseline(x):
    return np.zeros_like(x)


def bad(x):
    xf = x.astype(np.float32)
    c = np.float32(math.sqrt(2.0 / math.pi))
    inner = c * (xf + np.float32(0.044715) * xf * xf * xf)
    return (np.float32(0.5) * xf * (np.float32(1.0) + np.tanh(inner))).astype(x.dtype)


def good(x):
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)).astype(np.float64))).astype(x.dtype)
