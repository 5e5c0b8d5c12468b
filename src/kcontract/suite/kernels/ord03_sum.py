"""Calibration of ord03-sum: the split count follows the batch size.

bad: to keep the machine busy, a batch of few rows splits every row into more
blocks (32 // rows of them: 32 blocks for a row alone, 2 in a batch of 16, 1 in a
batch of 64); the block partials are added in order in float32. Each split is
accurate (passes allclose(1e-2)), but a row's bits depend on how many rows it was
batched with.
good: every row reduced on its own with a fixed chunking (blocks of 256 summed
pairwise, block partials added in order), whatever the batch.
"""
import numpy as np

from kcontract.suite.kernels.ord_schedules import split

DTYPE = "float32"
DECLARE = {"batch_invariant": "true"}
CHUNK = 256


def baseline(x):
    return np.zeros(x.shape[:-1], dtype=x.dtype)


def bad(x):
    x32 = x.astype(np.float32).reshape(-1, x.shape[-1])
    blocks = max(1, 32 // max(1, x32.shape[0]))
    acc = np.zeros(x32.shape[0], dtype=np.float32)
    for s in split(x32.shape[1], blocks):
        acc = acc + np.sum(x32[:, s], axis=-1, dtype=np.float32)
    return acc.reshape(x.shape[:-1]).astype(x.dtype)


def good(x):
    x32 = x.astype(np.float32).reshape(-1, x.shape[-1])
    out = np.empty(x32.shape[0], dtype=np.float32)
    for i, row in enumerate(x32):
        acc = np.float32(0.0)
        for k in range(0, row.size, CHUNK):
            acc = np.float32(acc + np.add.reduce(row[k:k + CHUNK], dtype=np.float32))
        out[i] = acc
    return out.reshape(x.shape[:-1]).astype(x.dtype)
