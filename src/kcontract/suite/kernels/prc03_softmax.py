"""Calibration of prc03-softmax: subnormal probabilities flushed to zero (FTZ).

bad: softmax evaluated in float64, then probabilities below float32's normal range written
as zero (what a flush-to-zero mode does to exp of a logit far below the row maximum).
Passes allclose(1e-2) on rand inputs.
"""
import numpy as np

DTYPE = "float32"


def _softmax64(x):
    p = np.asarray(x, dtype=np.float64)
    e = np.exp(p - np.max(p, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def baseline(x):
    return np.ones_like(x)  # (zeros would pass allclose(1e-2): probabilities of 1/N are small)


def bad(x):
    y = _softmax64(x).astype(x.dtype)
    return np.where(np.abs(y) < np.finfo(x.dtype).tiny, 0, y).astype(x.dtype)


def good(x):
    return _softmax64(x).astype(x.dtype)
