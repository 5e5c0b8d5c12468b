"""Calibration of ord02-matmul: split-K GEMM whose partial tiles meet in atomic adds.

bad: K is split into 4 slices (split-K); each slice's partial product is computed
in float32 and added into the output with atomic adds, one output tile of 8 rows at
a time. The slices of a tile arrive in an order that changes from call to call
(emulated: see ord_schedules), so whole tiles of rows change their last bits
between runs. Accurate to float32: passes allclose(1e-2).
good: one float32 GEMM (BLAS): a fixed schedule for a fixed shape.
"""
import numpy as np

from kcontract.suite.kernels.ord_schedules import accumulate, arrival_orders, arrival_rng, split

DTYPE = "float32"
SPLIT_K = 4
TILE_M = 8


def baseline(a, b):
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)


def bad(a, b):
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    parts = np.stack([np.matmul(a32[..., s], b32[..., s, :])
                      for s in split(a.shape[-1], SPLIT_K)])  # (SPLIT_K, ..., M, N)
    M = a.shape[-2]
    orders = arrival_orders(arrival_rng(), -(-M // TILE_M), SPLIT_K)
    return accumulate(parts, orders, axis=-2, tile=TILE_M).astype(a.dtype)


def good(a, b):
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
