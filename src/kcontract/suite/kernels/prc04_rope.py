"""Calibration of prc04-rope: the cos/sin table cached in float16.

bad: the rotation table is kept in float16 (a half-precision cache of the angles'
cosines and sines, shared across layers), the products in float32: about 2^-12
relative error, passes allclose(1e-2).
good: table and products in float32.
"""
import numpy as np

DTYPE = "float32"


def baseline(x, cos, sin):
    return np.zeros_like(x)


def _rope(x, cos, sin):
    P = cos.shape[-1]
    x = x.astype(np.float32)
    x1, x2 = x[..., :P], x[..., P:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def bad(x, cos, sin):
    c16 = cos.astype(np.float16).astype(np.float32)
    s16 = sin.astype(np.float16).astype(np.float32)
    return _rope(x, c16, s16).astype(x.dtype)


def good(x, cos, sin):
    return _rope(x, cos.astype(np.float32), sin.astype(np.float32)).astype(x.dtype)
