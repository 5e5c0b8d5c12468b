"""Calibration of ord02-linear_gelu: split-K GEMM with atomic adds, then bias and gelu.

bad: x @ w is computed split-K (4 slices) with the slices' partial tiles (8 rows
each) added into the pre-activation with atomic adds, in an order that changes from
call to call (emulated: see ord_schedules); bias and gelu follow in the epilogue.
Tiles of rows change their last bits between runs. Accurate to float32: passes
allclose(1e-2).
good: one float32 GEMM, then the same epilogue.
"""
import math

import numpy as np

from kcontract.suite.kernels.ord_schedules import accumulate, arrival_orders, arrival_rng, split

DTYPE = "float32"
SPLIT_K = 4
TILE_M = 8
_erf = np.frompyfunc(math.erf, 1, 1)


def baseline(x, w, b):
    return np.zeros((x.shape[0], w.shape[1]), dtype=x.dtype)


def _epilogue(pre, b):
    pre = (pre + b.astype(np.float32)).astype(np.float64)
    return (0.5 * pre * (1.0 + _erf(pre / math.sqrt(2.0)).astype(np.float64))).astype(np.float32)


def bad(x, w, b):
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    parts = np.stack([np.matmul(x32[:, s], w32[s, :]) for s in split(x.shape[1], SPLIT_K)])
    orders = arrival_orders(arrival_rng(), -(-x.shape[0] // TILE_M), SPLIT_K)
    return _epilogue(accumulate(parts, orders, axis=0, tile=TILE_M), b).astype(x.dtype)


def good(x, w, b):
    pre = np.matmul(x.astype(np.float32), w.astype(np.float32))
    return _epilogue(pre, b).astype(x.dtype)
