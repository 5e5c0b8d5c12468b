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
