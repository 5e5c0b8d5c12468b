"""Calibration of prc03-layernorm: subnormal results flushed to zero (FTZ).

bad: layernorm evaluated in float64, then results below float32's normal range written as
zero (a flush-to-zero store). Passes allclose(1e-2) on rand inputs.
"""
import numpy as np

DTYPE = "float32"


def _layernorm64(x, weight, bias, eps):
    x64 = np.asarray(x, dtype=np.float64)
    mu = np.mean(x64, axis=-1, keepdims=True)
    var = np.mean((x64 - mu) ** 2, axis=-1, keepdims=True)
    return (x64 - mu) / np.sqrt(var + eps) * weight.astype(np.float64) + bias.astype(np.float64)


def baseline(x, weight, bias, eps=1e-5):
    return np.zeros_like(x)


def bad(x, weight, bias, eps=1e-5):
    y = _layernorm64(x, weight, bias, eps).astype(x.dtype)
    return np.where(np.abs(y) < np.finfo(x.dtype).tiny, 0, y).astype(x.dtype)


def good(x, weight, bias, eps=1e-5):
    return _layernorm64(x, weight, bias, eps).astype(x.dtype)
