"""Calibration of cmp03-cumsum: a tiled scan without a partial last tile.

bad: scans tiles of 256 elements and carries between them, but launches N // 256
tiles: the last N % 256 prefixes are never written (left zero). Exact at the benchmark
N = 1024; wrong whenever N % 256 != 0.
good: the whole row, float32.
"""
import numpy as np

DTYPE = "float32"
TILE = 256


def baseline(x):
    return np.zeros_like(x)


def bad(x):
    xf = x.astype(np.float32)
    out = np.zeros_like(xf)
    n = xf.shape[-1] // TILE * TILE
    out[..., :n] = np.cumsum(xf[..., :n], axis=-1, dtype=np.float32)
    return out.astype(x.dtype)


def good(x):
    return np.cumsum(x.astype(np.float32), axis=-1, dtype=np.float32).astype(x.dtype)
