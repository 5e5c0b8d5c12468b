"""Calibration of cmp03-linear_gelu: output-column tiles of 16 without a remainder tile.

bad: computes the output in column tiles of 16 and launches N // 16 of them: the last
N % 16 columns stay zero. Exact at the benchmarked N = 64; wrong whenever N % 16 != 0.
good: every column: float32 product and bias, erf GELU, rounded once.
"""
import math

import numpy as np

DTYPE = "float32"
TILE_N = 16
_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(pre):
    p = np.asarray(pre, dtype=np.float64)
    return 0.5 * p * (1.0 + _erf(p / math.sqrt(2.0)).astype(np.float64))


def baseline(x, w, b):
    return np.zeros((x.shape[0], w.shape[1]), dtype=x.dtype)


def bad(x, w, b):
    N = w.shape[1]
    n = N // TILE_N * TILE_N
    out = np.zeros((x.shape[0], N), dtype=x.dtype)
    pre = np.matmul(x.astype(np.float32), w[:, :n].astype(np.float32)) + b[:n].astype(np.float32)
    out[:, :n] = _gelu(pre).astype(x.dtype)
    return out


def good(x, w, b):
    pre = np.matmul(x.astype(np.float32), w.astype(np.float32)) + b.astype(np.float32)
    return _gelu(pre).astype(x.dtype)
