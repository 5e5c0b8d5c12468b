"""Calibration of ord03-rmsnorm: a split mean square in small batches.

bad: when the batch has fewer than 16 rows, each row's sum of squares is split over
16 // rows blocks whose partial sums are added at the end (more parallelism for a
small batch, as split-row kernels do); with 16 rows or more, one sequential pass per
row. Both are float32-accurate (pass allclose(1e-2)), but a row's bits depend on the
batch size.
good: every row on its own, one fixed-order pass, whatever the batch.
"""
import numpy as np

from kcontract.suite.kernels.ord_schedules import split

DTYPE = "float32"
DECLARE = {"batch_invariant": "true"}


def baseline(x, weight, eps=1e-6):
    return np.zeros_like(x)


def _finish(x32, ss, weight, eps):
    ms = ss / np.float32(x32.shape[-1])
    return x32 / np.sqrt(ms[:, None] + np.float32(eps)) * weight.astype(np.float32)


def bad(x, weight, eps=1e-6):
    x32 = x.astype(np.float32).reshape(-1, x.shape[-1])
    R = x32.shape[0]
    blocks = max(1, 16 // max(1, R))
    sq = x32 * x32
    with np.errstate(over="ignore", invalid="ignore"):
        if blocks == 1:
            ss = np.add.reduce(sq, axis=-1, dtype=np.float32)
        else:
            ss = np.zeros(R, np.float32)
            for s in split(x32.shape[1], blocks):
                ss = ss + np.add.reduce(sq[:, s][:, ::-1], axis=-1, dtype=np.float32)
        return _finish(x32, ss, weight, eps).reshape(x.shape).astype(x.dtype)


def good(x, weight, eps=1e-6):
    x32 = x.astype(np.float32).reshape(-1, x.shape[-1])
    ss = np.empty(x32.shape[0], np.float32)
    for i, row in enumerate(x32):
        ss[i] = np.add.reduce(row * row, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return _finish(x32, ss, weight, eps).reshape(x.shape).astype(x.dtype)
