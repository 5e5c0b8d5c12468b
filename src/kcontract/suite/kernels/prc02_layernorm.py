"""Calibration of prc02-layernorm: variance as E[x^2] - E[x]^2.

bad: one pass over the row accumulating sum(x) and sum(x^2) in fp32, variance =
E[x^2] - E[x]^2 (a popular fused-kernel shortcut). Fine on rand inputs, but a large
common offset cancels catastrophically (often a negative variance: NaN).
"""
import numpy as np

DTYPE = "float32"


def baseline(x, weight, bias, eps=1e-5):
    return np.zeros_like(x)


def bad(x, weight, bias, eps=1e-5):
    mu = np.mean(x, axis=-1, keepdims=True, dtype=np.float32)
    ex2 = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
    var = ex2 - mu * mu
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((x - mu) / np.sqrt(var + np.float32(eps)) * weight + bias).astype(x.dtype)


def good(x, weight, bias, eps=1e-5):
    mu = np.mean(x, axis=-1, keepdims=True, dtype=np.float32)
    d = x - mu
    var = np.mean(d * d, axis=-1, keepdims=True, dtype=np.float32)
    return (d / np.sqrt(var + np.float32(eps)) * weight + bias).astype(x.dtype)
