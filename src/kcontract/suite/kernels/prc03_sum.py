"""Calibration of prc03-sum: subnormal results flushed to zero (FTZ).

bad: an exact fp32 sum whose subnormal results are written as zero, as a
flush-to-zero mode does (emulated with np.where). Passes allclose(1e-2) on rand.
"""
import numpy as np

DTYPE = "float32"


def baseline(x):
    return np.zeros(x.shape[:-1], dtype=x.dtype)


def bad(x):
    s = np.sum(x, axis=-1, dtype=np.float32)
    return np.where(np.abs(s) < np.finfo(np.float32).tiny, np.float32(0), s).astype(x.dtype)


def good(x):
    return np.sum(x, axis=-1, dtype=np.float32).astype(x.dtype)
