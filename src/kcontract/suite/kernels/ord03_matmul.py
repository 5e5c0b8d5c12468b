"""Calibration of ord03-matmul: split-K chosen from the number of rows.

bad: like GEMM heuristics that pick split-K from the problem shape, a product with
few rows (M <= 4) splits K in 8 slices, a medium one (M <= 16) in 4, a tall one not
at all; each row's float32 partial products over a slice are reduced in order on
their own (so nothing but the split depends on the batch, whatever the BLAS does
for one row against many), and the slices added in order. Every variant is
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


def _rowwise(a, b, slices):
    """Each row of a times b on its own: per slice, the (K_s, N) float32 products reduced
    over K_s in order; the slices' partial results added in order."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    lead = a.shape[:-2]
    a2 = a32.reshape((-1,) + a.shape[-2:])
    b2 = np.broadcast_to(b32, lead + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    out = np.zeros((a2.shape[0], a.shape[-2], b.shape[-1]), dtype=np.float32)
    for z in range(a2.shape[0]):
        for i in range(a.shape[-2]):
            for s in slices:
                out[z, i] = out[z, i] + np.add.reduce(a2[z, i, s][:, None] * b2[z, s],
                                                      axis=0, dtype=np.float32)
    return out.reshape(lead + out.shape[1:]).astype(a.dtype)


def bad(a, b):
    return _rowwise(a, b, list(split(a.shape[-1], _split_k(a.shape[-2]))))


def good(a, b):
    return _rowwise(a, b, [slice(None)])
