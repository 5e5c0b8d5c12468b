"""Calibration of ord02-layernorm: row statistics gathered with atomic adds.

bad: each row is cut into 4 blocks; the blocks add their partial sums of x (for
the mean) and then of (x - mean)^2 (for the variance) into the row's statistics
with atomic adds, in an order that changes from call to call (emulated: see
ord_schedules). When a statistic moves by an ulp every element of the row moves,
so whole rows change their last bits between runs. Two-pass and float32-accurate:
passes allclose(1e-2).
good: the same two-pass float32 formulation with fixed-order row sums.
"""
import numpy as np

from kcontract.suite.kernels.ord_schedules import accumulate, arrival_orders, arrival_rng, split

DTYPE = "float32"
BLOCKS = 4


def baseline(x, weight, bias, eps=1e-5):
    return np.zeros_like(x)


def _finish(x32, mu, var, weight, bias, eps):
    inv = (1.0 / np.sqrt(var + np.float32(eps))).astype(np.float32)
    return (x32 - mu[:, None]) * inv[:, None] * weight.astype(np.float32) \
        + bias.astype(np.float32)


def bad(x, weight, bias, eps=1e-5):
    x32 = x.astype(np.float32).reshape(-1, x.shape[-1])
    n = np.float32(x.shape[-1])
    rng = arrival_rng()
    blocks = split(x.shape[-1], BLOCKS)
    with np.errstate(over="ignore", invalid="ignore"):
        s1 = np.stack([np.sum(x32[:, s], axis=-1, dtype=np.float32) for s in blocks])
        mu = accumulate(s1, arrival_orders(rng, x32.shape[0], BLOCKS), 0, 1) / n
        d = x32 - mu[:, None]
        s2 = np.stack([np.sum(d[:, s] * d[:, s], axis=-1, dtype=np.float32) for s in blocks])
        var = accumulate(s2, arrival_orders(rng, x32.shape[0], BLOCKS), 0, 1) / n
        return _finish(x32, mu, var, weight, bias, eps).reshape(x.shape).astype(x.dtype)


def good(x, weight, bias, eps=1e-5):
    x32 = x.astype(np.float32).reshape(-1, x.shape[-1])
    n = np.float32(x.shape[-1])
    with np.errstate(over="ignore", invalid="ignore"):
        mu = np.sum(x32, axis=-1, dtype=np.float32) / n
        d = x32 - mu[:, None]
        var = np.sum(d * d, axis=-1, dtype=np.float32) / n
        return _finish(x32, mu, var, weight, bias, eps).reshape(x.shape).astype(x.dtype)
