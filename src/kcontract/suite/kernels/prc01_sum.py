"""Calibration of prc01-sum: a split reduction whose partial sums live in float16.

bad: blocks of 256 are summed in fp32, each block's partial is written to an fp16
workspace and the partials are combined in fp16 (a split-K reduction with a
half-precision workspace). Relative error ~1e-3: passes allclose(1e-2).
"""
import numpy as np

DTYPE = "float32"
BLOCK = 256


def baseline(x):
    return np.zeros(x.shape[:-1], dtype=x.dtype)


def bad(x):
    n = x.shape[-1]
    acc = np.zeros(x.shape[:-1], dtype=np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        for k0 in range(0, n, BLOCK):
            part = np.sum(x[..., k0:k0 + BLOCK], axis=-1, dtype=np.float32)
            acc = (acc.astype(np.float32) + part.astype(np.float16)).astype(np.float16)
    return acc.astype(x.dtype)


def good(x):
    return np.sum(x, axis=-1, dtype=np.float32).astype(x.dtype)
