"""Calibration of prc01-rmsnorm: the mean square accumulated in bfloat16.

bad: squares summed in float32 blocks of 128 elements, the block sums added into a
bfloat16 running total (a bf16 workspace, as in kernels that keep the statistics in the
input format). Relative error of the mean square ~2^-9: passes allclose(1e-2), far
above what a float32 accumulator allows at N = 4096.
good: the mean square in float32.
"""
import ml_dtypes
import numpy as np

DTYPE = "float32"
BLOCK = 128
_BF16 = np.dtype(ml_dtypes.bfloat16)


def baseline(x, weight, eps=1e-6):
    return np.zeros_like(x)


def _bf16_sum_of_squares(x):
    acc = np.zeros(x.shape[:-1] + (1,), dtype=_BF16)
    for k0 in range(0, x.shape[-1], BLOCK):
        blk = x[..., k0:k0 + BLOCK]
        part = np.sum(blk * blk, axis=-1, keepdims=True, dtype=np.float32)
        acc = (acc.astype(np.float32) + part).astype(_BF16)
    return acc.astype(np.float32)


def bad(x, weight, eps=1e-6):
    ms = _bf16_sum_of_squares(x.astype(np.float32)) / np.float32(x.shape[-1])
    return (x / np.sqrt(ms + np.float32(eps)) * weight).astype(x.dtype)


def good(x, weight, eps=1e-6):
    xf = x.astype(np.float32)
    ms = np.mean(xf * xf, axis=-1, keepdims=True, dtype=np.float32)
    return (xf / np.sqrt(ms + np.float32(eps)) * weight.astype(np.float32)).astype(x.dtype)
