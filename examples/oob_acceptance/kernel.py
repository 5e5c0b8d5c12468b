"""Out-of-bounds silent acceptance: two stacks, one embedding, two behaviours.

In a cross-accelerator study about 1,700 cases showed one vendor's stack returning
values for out-of-range indices where another raised. Both kernels below return
the same rows for every in-range index, so any benchmark that draws its indices
from [0, V) cannot tell them apart.

``embedding_clamps`` emulates the accepting stack: every index below 0 reads row 0,
every index at or above V reads row V-1, silently.  ``embedding_raises`` emulates
the checking stack: an out-of-range index raises IndexError.
"""
import numpy as np


def embedding_clamps(table, indices):
    """Gather rows; out-of-range indices are clamped into [0, V-1] without a word."""
    return np.take(table, indices, axis=0, mode="clip")


def embedding_raises(table, indices):
    """Gather rows; an index outside [0, V) raises IndexError."""
    V = table.shape[0]
    bad = (indices < 0) | (indices >= V)
    if np.any(bad):
        first = int(indices[np.argmax(bad)])
        raise IndexError(f"index {first} is out of range for an embedding of {V} rows")
    return table[indices]
