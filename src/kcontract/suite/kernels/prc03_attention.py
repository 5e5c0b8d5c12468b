"""Calibration of prc03-attention: flush to zero inside attention (FTZ).

bad: attention evaluated in float64, the probabilities below float32's normal range written
as zero before the product with v, and results below it written as zero (what a
flush-to-zero mode does to exp of a score far below the row maximum and to a subnormal
weighted sum). Passes allclose(1e-2) on rand inputs.
"""
import math

import numpy as np

DTYPE = "float32"


def _probs(q, k, causal):
    q64, k64 = np.asarray(q, np.float64), np.asarray(k, np.float64)
    s = np.matmul(q64, np.swapaxes(k64, -1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        S, T = q.shape[-2], k.shape[-2]
        s = np.where(np.arange(T)[None, :] <= np.arange(S)[:, None] + (T - S), s, -np.inf)
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def _flush(y, dtype):
    return np.where(np.abs(y) < np.finfo(dtype).tiny, 0.0, y)


def baseline(q, k, v, causal=False):
    return np.zeros_like(q)


def bad(q, k, v, causal=False):
    p = _flush(_probs(q, k, causal), q.dtype)
    return _flush(np.matmul(p, np.asarray(v, np.float64)), q.dtype).astype(q.dtype)


def good(q, k, v, causal=False):
    return np.matmul(_probs(q, k, causal), np.asarray(v, np.float64)).astype(q.dtype)
