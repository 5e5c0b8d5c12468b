"""Calibration of prc02-attention: softmax inside attention without max subtraction.

bad: p = exp(s) / sum(exp(s)) on raw scores, fp32. Exact enough for rand inputs
(scores below 6), overflows for large scores (NaN outputs).
"""
import math

import numpy as np

DTYPE = "float32"


def _mask(S, T):
    return np.arange(T)[None, :] <= np.arange(S)[:, None] + (T - S)


def _scores(q, k, causal):
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(1.0 / math.sqrt(q.shape[-1]))
    if causal:
        s = np.where(_mask(q.shape[-2], k.shape[-2]), s, -np.inf)
    return s


def baseline(q, k, v, causal=False):
    return np.zeros_like(q)


def bad(q, k, v, causal=False):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(_scores(q, k, causal))
        p = e / np.sum(e, axis=-1, keepdims=True)
        return np.matmul(p, v).astype(q.dtype)


def good(q, k, v, causal=False):
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        s = _scores(q, k, causal)
        e = np.exp(s - np.max(s, axis=-1, keepdims=True))
        p = e / np.sum(e, axis=-1, keepdims=True)
        return np.matmul(p, v).astype(q.dtype)
