"""Kernels that attack the process they run in (for isolation tests)."""
import ctypes
import os
import time

import numpy as np


def honest(a, b):
    return a @ b


def segfault(a, b):
    ctypes.string_at(0)


def hang(a, b):
    time.sleep(3600)


def exits(a, b):
    os._exit(0)


def raises(a, b):
    raise RuntimeError("kernel bug")


def flush_to_zero(a, b):
    import torch
    torch.set_flush_denormal(True)
    return a @ b


def patches_numpy(a, b):
    np.allclose = lambda *args, **kw: True
    np.abs = lambda x: np.zeros_like(x)
    return np.zeros((a.shape[0], b.shape[1]), dtype=a.dtype)


def wrong_shape(a, b):
    return (a @ b)[:, :-1]


def wrong_dtype(a, b):
    return (a @ b).astype(np.float64)


def returns_none(a, b):
    return None


def mutates_input(a, b):
    out = a @ b
    a[...] = 0
    return out


def aliases_input(a, b):
    return a[:, : b.shape[1]]


def plainly_wrong(a, b):
    return (a @ b) * 1.01
