"""Calibration of cmp03-layernorm: the row length baked in as a constant.

bad: computes mean and variance as sums times 1/512, the benchmarked N, folded into a
compile-time constant. Exact up to rounding at N = 512; wrong statistics at every other N.
good: mean and variance over the actual row, float32.
"""
import numpy as np

DTYPE = "float32"
_INV_N = np.float32(1.0 / 512)


def baseline(x, weight, bias, eps=1e-5):
    return np.zeros_like(x)


def _norm(x, weight, bias, eps, inv_n):
    xf = x.astype(np.float32)
    mu = np.sum(xf, axis=-1, keepdims=True) * inv_n
    var = np.sum((xf - mu) ** 2, axis=-1, keepdims=True) * inv_n
    y = (xf - mu) / np.sqrt(var + np.float32(eps)) * weight.astype(np.float32) + bias.astype(np.float32)
    return y.astype(x.dtype)


def bad(x, weight, bias, eps=1e-5):
    return _norm(x, weight, bias, eps, _INV_N)


def good(x, weight, bias, eps=1e-5):
    return _norm(x, weight, bias, eps, np.float32(1.0 / x.shape[-1]))
