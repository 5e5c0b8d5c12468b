"""Kernels that do exactly what they declare (test_claims_honoured.py)."""
import numpy as np

_C = np.sqrt(2 / np.pi)


def _gelu_tanh(x64):
    with np.errstate(invalid="ignore", over="ignore"):
        return _gelu_tanh_raw(x64)


def _gelu_tanh_raw(x64):
    return 0.5 * x64 * (1 + np.tanh(_C * (x64 + 0.044715 * x64 ** 3)))


def gelu_tanh(x):
    return _gelu_tanh(x.astype(np.float64)).astype(x.dtype)


def linear_gelu_tanh(x, w, b):
    pre = np.matmul(x.astype(np.float64), w.astype(np.float64)) + b.astype(np.float64)
    return _gelu_tanh(pre).astype(x.dtype)


def _flush(y, dtype):
    tiny = np.finfo(dtype).tiny
    return np.where(np.abs(y) < tiny, 0.0, y).astype(dtype)


def softmax_ftz(x):
    """softmax in float64, results below the smallest normal returned as zero."""
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x64 - np.max(x64, axis=-1, keepdims=True))
        return _flush(e / np.sum(e, axis=-1, keepdims=True), x.dtype)


def gelu_ftz(x):
    from math import erf
    x64 = np.where(np.abs(x) < np.finfo(x.dtype).tiny, 0.0, x.astype(np.float64))
    with np.errstate(invalid="ignore"):
        y = 0.5 * x64 * (1 + np.vectorize(erf)(x64 / np.sqrt(2)))
    return _flush(y, x.dtype)


def _daz(a):
    return np.where(np.abs(a) < np.finfo(a.dtype).tiny, 0.0, a.astype(np.float64))


def layernorm_ftz(x, weight, bias, eps=1e-5):
    """layernorm in float64 on inputs with subnormals read as zero, results below the
    smallest normal returned as zero (DAZ and FTZ)."""
    x64 = _daz(x)
    with np.errstate(invalid="ignore", over="ignore"):
        mu = np.mean(x64, axis=-1, keepdims=True)
        var = np.mean((x64 - mu) ** 2, axis=-1, keepdims=True)
        y = (x64 - mu) / np.sqrt(var + eps) * _daz(weight) + _daz(bias)
    return _flush(y, x.dtype)


def attention_ftz(q, k, v, causal=False):
    """attention in float64, subnormal operands read as zero, probabilities and results
    below the smallest normal returned as zero."""
    q64, k64, v64 = _daz(q), _daz(k), _daz(v)
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.matmul(q64, np.swapaxes(k64, -1, -2)) / np.sqrt(q.shape[-1])
        if causal:
            S, T = q.shape[-2], k.shape[-2]
            s = np.where(np.arange(T)[None, :] <= np.arange(S)[:, None] + (T - S), s, -np.inf)
        e = np.exp(s - np.max(s, axis=-1, keepdims=True))
        p = e / np.sum(e, axis=-1, keepdims=True)
        p = np.where(p < np.finfo(q.dtype).tiny, 0.0, p)
        return _flush(np.matmul(p, v64), q.dtype)


def linear_gelu_ftz(x, w, b):
    """gelu(x @ w + b) in float64, subnormal operands read as zero, results below the
    smallest normal returned as zero."""
    from math import erf
    with np.errstate(invalid="ignore", over="ignore"):
        pre = np.matmul(_daz(x), _daz(w)) + _daz(b)
        y = 0.5 * pre * (1 + np.vectorize(erf)(pre / np.sqrt(2)))
    return _flush(y, x.dtype)
