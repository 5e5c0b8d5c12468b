"""Correct numpy kernels for every op: compute in float32 (float64 for float64
inputs), round once to the input's dtype."""
import math

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def _work(x):
    return np.float64 if x.dtype == np.float64 else np.float32


def matmul(a, b):
    w = _work(a)
    return np.matmul(a.astype(w), b.astype(w)).astype(a.dtype)


def sum(x):  # noqa: A001 - the op's name
    w = _work(x)
    return np.sum(x.astype(w), axis=-1).astype(x.dtype)


def _softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax(x):
    return _softmax(x.astype(_work(x))).astype(x.dtype)


def layernorm(x, weight, bias, eps=1e-5):
    w = _work(x)
    xf = x.astype(w)
    mu = np.mean(xf, axis=-1, keepdims=True)
    var = np.mean((xf - mu) ** 2, axis=-1, keepdims=True)
    y = (xf - mu) / np.sqrt(var + w(eps)) * weight.astype(w) + bias.astype(w)
    return y.astype(x.dtype)


def attention(q, k, v, causal=False):
    w = _work(q)
    qf, kf, vf = q.astype(w), k.astype(w), v.astype(w)
    s = np.matmul(qf, np.swapaxes(kf, -1, -2)) / w(math.sqrt(q.shape[-1]))
    if causal:
        S, T = q.shape[-2], k.shape[-2]
        mask = np.arange(T)[None, :] <= np.arange(S)[:, None] + (T - S)
        s = np.where(mask, s, -np.inf)
    return np.matmul(_softmax(s), vf).astype(q.dtype)


def embedding(table, indices):
    if np.any(indices < 0) or np.any(indices >= table.shape[0]):
        raise IndexError("index out of range in embedding")
    return table[indices]


def _gelu(x):
    x64 = x.astype(np.float64)
    return 0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)).astype(np.float64))


def gelu(x):
    return _gelu(x).astype(x.dtype)


def linear_gelu(x, w, b):
    wk = _work(x)
    pre = np.matmul(x.astype(wk), w.astype(wk)) + b.astype(wk)
    return _gelu(pre).astype(x.dtype)


def cast(x, dtype="float32"):
    import ml_dtypes
    target = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    return x.astype(target)
from newops_numpy import *  # noqa: E402,F401,F403  (rmsnorm, rope, ...)
