"""Calibration of ord03-matmul: split-K chosen from the number of rows.

bad: like GEMM heuristics that pick split-K from the problem shape, a product with
few rows (M <= 4) splits K in 8 slices, a medium one (M <= 16) in 4, a tall one not
at all; the slices' float32 partial products are added in order. Every variant is
float32-accurate (passes allclose(1e-2)), but a row's bits depend on how many rows
were multiplied together: alone and in a batch of 3 it agrees with itself, in
batches of 16 and 64 it does not.
good: every row of a times b on its own, in a fixed order (float32 products,
K accumulated in order), whatever M is.
"""
import numpy as np

from kcontract.suite.kernels.ord_schedules import split

DTYPE = "float32"
DECLARE = {"batch_invariant": "true"}


def baseline(a, b):
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)


def _split_k(M):
    return 8 if M <= 4 else 4 if M <= 16 else 1


def bad(a, b):
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    acc = np.zeros(a.shape[:-1] + b.shape[-1:], dtype=np.float32)
    for s in split(a.shape[-1], _split_k(a.shape[-2])):
        acc = acc + np.matmul(a32[..., s], b32[..., s, :])
    return acc.astype(a.dtype)


def good(a, b):
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    lead = a.shape[:-2]
    a2 = a32.reshape((-1,) + a.shape[-2:])
    b2 = np.broadcast_to(b32, lead + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    out = np.empty((a2.shape[0], a.shape[-2], b.shape[-1]), dtype=np.float32)
    for z in range(a2.shape[0]):
        for i in range(a.shape[-2]):
            # (K, N) products, reduced over K in order: one row's own schedule
            out[z, i] = np.add.reduce(a2[z, i][:, None] * b2[z], axis=0, dtype=np.float32)
    return out.reshape(lead + out.shape[1:]).astype(a.dtype)
