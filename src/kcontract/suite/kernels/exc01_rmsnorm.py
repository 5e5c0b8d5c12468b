"""Calibration of exc01-rmsnorm: a mean square that skips NaN.

bad: the mean square by nanmean (a "NaN-robust" RMSNorm): the NaN position stays NaN,
the rest of its row comes out finite, where IEEE propagation makes the whole row NaN.
Rand inputs hold no NaN: passes allclose(1e-2).
good: the mean square in float32, NaN and Inf propagating as IEEE 754 says.
"""
import warnings

import numpy as np

DTYPE = "float32"


def baseline(x, weight, eps=1e-6):
    return np.zeros_like(x)


def _rms(x, weight, eps, mean):
    with np.errstate(all="ignore"):
        xf = x.astype(np.float32)
        ms = mean(xf * xf, axis=-1, keepdims=True)
        return (xf / np.sqrt(ms + np.float32(eps)) * weight.astype(np.float32)).astype(x.dtype)


def bad(x, weight, eps=1e-6):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _rms(x, weight, eps, np.nanmean)


def good(x, weight, eps=1e-6):
    return _rms(x, weight, eps, np.mean)
