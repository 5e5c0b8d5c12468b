"""Calibration of exc02-embedding: an embedding that clamps out-of-range indices.

bad: np.take(mode='clip'), which silently maps every index below 0 to row 0 and
every index >= V to row V-1, while the default policy is oob=raise. The basic test
uses in-range indices only: passes allclose(1e-2).
"""
import numpy as np

DTYPE = "float32"


def baseline(table, indices):
    return np.zeros((indices.shape[0], table.shape[1]), dtype=table.dtype)


def bad(table, indices):
    return np.take(table, indices, axis=0, mode="clip")


def good(table, indices):
    if np.any(indices < 0) or np.any(indices >= table.shape[0]):
        raise IndexError(f"index out of range [0, {table.shape[0]}) in embedding")
    return table[indices]
