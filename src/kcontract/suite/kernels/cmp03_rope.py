"""Calibration of cmp03-rope: the head dimension baked in.

bad: splits x at a compile-time half of 32 (the benchmark's head dimension 64) and
reads the tables' first 32 columns: exact at P = 32, wrong pairs at every other P
(and a shape error where P < 32).
good: splits at the tables' own width P.
"""
import numpy as np

DTYPE = "float32"
HALF = 32


def baseline(x, cos, sin):
    return np.zeros_like(x)


def _rope(x, cos, sin, P):
    x = x.astype(np.float32)
    c, s = cos[:, :P].astype(np.float32), sin[:, :P].astype(np.float32)
    x1, x2 = x[..., :P], x[..., P:2 * P]
    out = x.copy()
    out[..., :P] = x1 * c - x2 * s
    out[..., P:2 * P] = x2 * c + x1 * s
    return out


def bad(x, cos, sin):
    return _rope(x, cos, sin, HALF).astype(x.dtype)


def good(x, cos, sin):
    return _rope(x, cos, sin, cos.shape[-1]).astype(x.dtype)
