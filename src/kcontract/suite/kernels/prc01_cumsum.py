"""Calibration of prc01-cumsum: tiles scanned in float16.

bad: each tile of 64 elements is scanned in float16 registers (the running value and
every addition in half precision), the tile totals then carried in float32: about
2^-11 relative at every prefix, passes allclose(1e-2).
good: the scan in float32.
"""
import numpy as np

DTYPE = "float32"
TILE = 64


def baseline(x):
    return np.zeros_like(x)


def bad(x):
    xf = x.astype(np.float32)
    out = np.empty_like(xf)
    carry = np.zeros(xf.shape[:-1] + (1,), dtype=np.float32)
    for k0 in range(0, xf.shape[-1], TILE):
        with np.errstate(over="ignore"):
            local = np.cumsum(xf[..., k0:k0 + TILE].astype(np.float16), axis=-1,
                              dtype=np.float16).astype(np.float32)
        out[..., k0:k0 + TILE] = local + carry
        carry = out[..., k0 + local.shape[-1] - 1:k0 + local.shape[-1]]
    return out.astype(x.dtype)


def good(x):
    return np.cumsum(x.astype(np.float32), axis=-1, dtype=np.float32).astype(x.dtype)
