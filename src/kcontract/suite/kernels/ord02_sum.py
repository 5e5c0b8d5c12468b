"""Calibration of ord02-sum: a split-row reduction finished with atomic adds.

bad: each row is cut into 8 blocks; every block sums its slice in float32 and adds
its partial into the row's output with an atomic add. The blocks arrive in a
different order on every call (emulated: see ord_schedules), so the last bits of
each row sum change from run to run. Accurate to float32: passes allclose(1e-2).
good: one fixed-order float32 reduction per row (numpy's pairwise sum).
"""
import numpy as np

from kcontract.suite.kernels.ord_schedules import accumulate, arrival_orders, arrival_rng, split

DTYPE = "float32"
BLOCKS = 8


def baseline(x):
    return np.zeros(x.shape[:-1], dtype=x.dtype)


def bad(x):
    x32 = x.astype(np.float32)
    parts = np.stack([np.sum(x32[..., s], axis=-1, dtype=np.float32)
                      for s in split(x.shape[-1], BLOCKS)])  # (BLOCKS, rows)
    rows = int(np.prod(x.shape[:-1], dtype=np.int64))
    orders = arrival_orders(arrival_rng(), rows, BLOCKS)
    out = accumulate(parts.reshape(BLOCKS, rows), orders, axis=0, tile=1)
    return out.reshape(x.shape[:-1]).astype(x.dtype)


def good(x):
    return np.sum(x, axis=-1, dtype=np.float32).astype(x.dtype)
