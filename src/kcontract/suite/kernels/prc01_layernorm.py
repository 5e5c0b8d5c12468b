"""Calibration of prc01-layernorm: statistics reduced through a float16 workspace.

bad: a two-pass layernorm whose block partial sums (128 elements, fp32) are stored in
fp16 and combined in fp16, for the mean and for the sum of squared deviations.
Relative error of the statistics ~1e-3: passes allclose(1e-2), but far above what
an fp32 accumulator allows at N = 4096.
"""
import numpy as np

DTYPE = "float32"
BLOCK = 128


def _fp16_workspace_sum(x):
    acc = np.zeros(x.shape[:-1] + (1,), dtype=np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        for k0 in range(0, x.shape[-1], BLOCK):
            part = np.sum(x[..., k0:k0 + BLOCK], axis=-1, keepdims=True, dtype=np.float32)
            acc = (acc.astype(np.float32) + part.astype(np.float16)).astype(np.float16)
    return acc.astype(np.float32)


def baseline(x, weight, bias, eps=1e-5):
    return np.zeros_like(x)


def bad(x, weight, bias, eps=1e-5):
    n = np.float32(x.shape[-1])
    mu = _fp16_workspace_sum(x) / n
    d = x - mu
    var = _fp16_workspace_sum(d * d) / n
    return (d / np.sqrt(var + np.float32(eps)) * weight + bias).astype(x.dtype)


def good(x, weight, bias, eps=1e-5):
    mu = np.mean(x, axis=-1, keepdims=True, dtype=np.float32)
    d = x - mu
    var = np.mean(d * d, axis=-1, keepdims=True, dtype=np.float32)
    return (d / np.sqrt(var + np.float32(eps)) * weight + bias).astype(x.dtype)
