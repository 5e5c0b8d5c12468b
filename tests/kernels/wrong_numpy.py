"""Plainly wrong kernels: a 2 % error, or a transposed/garbled result."""
import numpy as np

import correct_numpy as _ok

from correct_numpy import (attention as _attention, cast as _cast, gelu as _gelu,
                           layernorm as _layernorm, linear_gelu as _linear_gelu,
                           matmul as _matmul, softmax as _softmax, sum as _sum)


def _off(y):
    return (y.astype(np.float64) * 1.02).astype(y.dtype)


def matmul(a, b):
    return _off(_matmul(a, b))


def sum(x):  # noqa: A001
    return _off(_sum(x))


def softmax(x):
    return _off(_softmax(x))


def layernorm(x, weight, bias, eps=1e-5):
    return _off(_layernorm(x, weight, bias, eps))


def attention(q, k, v, causal=False):
    return _off(_attention(q, k, v, causal))


def embedding(table, indices):
    return table[np.clip(indices + 1, 0, table.shape[0] - 1)]


def gelu(x):
    return _off(_gelu(x))


def linear_gelu(x, w, b):
    return _off(_linear_gelu(x, w, b))


def cast(x, dtype="float32"):
    return _cast(x * np.float32(1.02), dtype)


# -- the LLM-era ops (rmsnorm, rope, silu_mul, cross_entropy, scaled_matmul, conv2d,
#    cumsum, topk) ----------------------------------------------------------------

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
