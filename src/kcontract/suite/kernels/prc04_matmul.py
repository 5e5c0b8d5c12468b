"""Calibration of prc04-matmul: operands silently rounded to TF32.

bad: both operands rounded to TF32 (10 fraction bits, round to nearest even on the
bit pattern) before an fp32-accumulating product: what 'allow_tf32' does. Relative
error ~1e-4: passes allclose(1e-2).
"""
import numpy as np

DTYPE = "float32"


def _tf32(x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    lsb = (bits >> np.uint32(13)) & np.uint32(1)
    r = (bits + np.uint32(0x0FFF) + lsb) & np.uint32(0xFFFFE000)
    return np.where(np.isfinite(x), r, bits).astype(np.uint32).view(np.float32)


def baseline(a, b):
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)


def bad(a, b):
    return np.matmul(_tf32(a), _tf32(b))


def good(a, b):
    return np.matmul(a, b)
