"""Calibration of ord02-embedding: a reduced-precision hot-row cache.

bad: like the software-managed caches of large embedding tables (UVM caching with a
half-precision cache), the kernel keeps the rows it has looked up in a bfloat16
cache, keyed by the table's contents and the row index. A row's first lookup reads
the float32 table; later lookups of the same row are served from the cache. The
output therefore depends on what earlier calls looked up: the second run of the same
inputs returns bfloat16-rounded rows. Relative error below 2^-8: passes allclose(1e-2).
good: a plain gather from the table.
"""
import hashlib

import ml_dtypes
import numpy as np

DTYPE = "float32"
_CACHE: dict = {}  # table fingerprint -> {row index: bfloat16 row}


def baseline(table, indices):
    return np.zeros((indices.shape[0], table.shape[1]), dtype=table.dtype)


def bad(table, indices):
    key = hashlib.blake2b(np.ascontiguousarray(table).tobytes(), digest_size=16).digest()
    cache = _CACHE.setdefault(key, {})
    out = table[indices]
    for j, i in enumerate(indices.tolist()):
        if i in cache:
            out[j] = cache[i].astype(table.dtype)
    for i in set(indices.tolist()):
        cache.setdefault(i, table[i].astype(ml_dtypes.bfloat16))
    return out


def good(table, indices):
    return table[indices]
