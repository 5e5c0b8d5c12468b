"""Kernels that read their inputs' memory as if every input were C-contiguous, as a
custom kernel does when it takes the data pointer and assumes row-major strides; and
the honest versions. Right at every shape with contiguous inputs, wrong on views."""
import numpy as np


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _as_if_contiguous(x):
    return np.lib.stride_tricks.as_strided(x, x.shape, _c_strides(x.shape, x.itemsize))


def matmul_ignores_strides(a, b):
    return np.matmul(_as_if_contiguous(a), _as_if_contiguous(b))


def matmul_honest(a, b):
    return np.matmul(a, b)


def softmax_ignores_strides(x):
    x = _as_if_contiguous(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def matmul_rejects_views(a, b):
    """Refuses what it was not written for, loudly: a raise on a view is a failure too."""
    if not (a.flags.c_contiguous and b.flags.c_contiguous):
        raise ValueError("inputs must be contiguous")
    return np.matmul(a, b)


def torch_matmul_ignores_strides(a, b):
    import torch

    def raw(x):
        return torch.as_strided(x, x.shape, _c_strides(tuple(x.shape), 1))
    return torch.matmul(raw(a), raw(b))
