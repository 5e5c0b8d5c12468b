"""Plainly wrong kernels for the LLM-era ops (imported by wrong_numpy.py)."""
import numpy as np

import newops_numpy as _ok


def _off(y):
    return (y.astype(np.float64) * 1.02).astype(y.dtype)


def rmsnorm(x, weight, eps=1e-6):
    return _off(_ok.rmsnorm(x, weight, eps))


def silu_mul(gate, up):
    return _off(_ok.silu_mul(gate, up))


def cumsum(x):
    return _off(_ok.cumsum(x))


def rope(x, cos, sin):
    return _off(_ok.rope(x, cos, sin))


def topk(x, k):
    # the k smallest instead of the largest
    return np.argsort(x, axis=-1, kind="stable")[..., :int(k)].astype(np.int64)


def cross_entropy(logits, target, ignore_index=-100):
    return _off(_ok.cross_entropy(logits, target, ignore_index))


def scaled_matmul(a, b, scale_a, scale_b):
    return _off(_ok.scaled_matmul(a, b, scale_a, scale_b))


def scaled_matmul_f32(a, b, scale_a, scale_b):
    return _off(_ok.scaled_matmul_f32(a, b, scale_a, scale_b))


def conv2d(x, w, stride, padding):
    return _off(_ok.conv2d(x, w, stride, padding))
