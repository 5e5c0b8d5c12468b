"""Calibration of prc01-matmul: products accumulated in a float16 accumulator.

bad: fp32 operands, each fp32 product added into an fp16 accumulator (an HMMA-style
fp16 C operand): passes allclose(1e-2) on rand inputs at K = 128, but its error grows
with K like an 11-bit accumulator.
"""
import numpy as np

DTYPE = "float32"


def baseline(a, b):
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)


def bad(a, b):
    acc = np.zeros(a.shape[:-1] + b.shape[-1:], dtype=np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(a.shape[-1]):
            prod = a[..., :, k:k + 1] * b[..., k:k + 1, :]          # fp32 product
            acc = (acc.astype(np.float32) + prod).astype(np.float16)  # fp16 accumulator
    return acc.astype(a.dtype)


def good(a, b):
    return np.matmul(a, b)
