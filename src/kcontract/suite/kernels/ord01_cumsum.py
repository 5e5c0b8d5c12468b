"""Calibration of ord01-cumsum: a blocked scan whose carries are kept in float16.

bad: each block of 128 elements is scanned in float32, and the running total carried
from block to block (the "decoupled look-back" value of a GPU scan) is stored in
float16. Relative error ~2^-12 from the second block on: passes allclose(1e-2), far
beyond what any float32 order of the same terms allows.
good: a blocked scan with float32 carries (another order than the oracle's, within
the bound).
"""
import numpy as np

DTYPE = "float32"
BLOCK = 128


def baseline(x):
    return np.zeros_like(x)


def _blocked(x, carry_dtype):
    xf = x.astype(np.float32)
    out = np.empty_like(xf)
    carry = np.zeros(xf.shape[:-1] + (1,), dtype=carry_dtype)
    for k0 in range(0, xf.shape[-1], BLOCK):
        local = np.cumsum(xf[..., k0:k0 + BLOCK], axis=-1, dtype=np.float32)
        out[..., k0:k0 + BLOCK] = local + carry.astype(np.float32)
        carry = out[..., k0 + local.shape[-1] - 1:k0 + local.shape[-1]].astype(carry_dtype)
    return out.astype(x.dtype)


def bad(x):
    return _blocked(x, np.float16)


def good(x):
    return _blocked(x, np.float32)
