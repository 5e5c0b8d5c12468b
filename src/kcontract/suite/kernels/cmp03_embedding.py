"""Calibration of cmp03-embedding: 8-wide row copies without a tail.

bad: copies each gathered row with 8-element vector moves and drops the last D % 8
columns (left zero). Exact at the benchmarked D = 32; wrong whenever D % 8 != 0.
good: the whole row.
"""
import numpy as np

DTYPE = "float32"
VEC = 8


def baseline(table, indices):
    return np.zeros((indices.shape[0], table.shape[1]), dtype=table.dtype)


def bad(table, indices):
    if np.any(indices < 0) or np.any(indices >= table.shape[0]):
        raise IndexError("index out of range in embedding")
    D = table.shape[1]
    d = D // VEC * VEC
    out = np.zeros((indices.shape[0], D), dtype=table.dtype)
    out[:, :d] = table[indices, :d]
    return out


def good(table, indices):
    if np.any(indices < 0) or np.any(indices >= table.shape[0]):
        raise IndexError("index out of range in embedding")
    return table[indices]
