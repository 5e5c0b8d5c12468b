"""Plainly wrong kernels: a 2 % error, or a transposed/garbled result."""
import numpy as np

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
from newops_wrong import *  # noqa: E402,F401,F403  (rmsnorm, rope, ...)
