"""Calibration of exc01-layernorm: statistics that skip NaN.

bad: mean and variance by nanmean (a "NaN-robust" layernorm): the NaN position stays
NaN but the rest of its row comes out finite, where IEEE propagation makes the whole
row NaN. Rand inputs hold no NaN: passes allclose(1e-2).
"""
import numpy as np

DTYPE = "float32"


def baseline(x, weight, bias, eps=1e-5):
    return np.zeros_like(x)


def _ln(x, weight, bias, eps, mean):
    with np.errstate(all="ignore"):
        xf = x.astype(np.float32)
        mu = mean(xf, axis=-1, keepdims=True)
        var = mean((xf - mu) ** 2, axis=-1, keepdims=True)
        y = (xf - mu) / np.sqrt(var + np.float32(eps)) * weight.astype(np.float32) \
            + bias.astype(np.float32)
        return y.astype(x.dtype)


def bad(x, weight, bias, eps=1e-5):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _ln(x, weight, bias, eps, np.nanmean)


def good(x, weight, bias, eps=1e-5):
    return _ln(x, weight, bias, eps, np.mean)
