"""Vendor stack A: float32 arithmetic as declared, but gathers clamp out-of-range indices.

Each function emulates what one software stack does for a float32 op, in numpy, so
the dispute can be reproduced on any machine.
"""
import numpy as np


def matmul(a, b):
    """float32 operands, float32 accumulation (blocked, like a BLAS), one rounding."""
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)


def embedding(table, indices):
    """Silently clamps out-of-range indices to the nearest valid row (no error)."""
    idx = np.clip(indices, 0, table.shape[0] - 1)
    return table[idx]


def sum(x):  # noqa: A001 - the op's name
    """float32 accumulation, pairwise order (numpy's reduction)."""
    return np.sum(x.astype(np.float32), axis=-1).astype(x.dtype)
