"""Calibration of cmp03-topk: per-warp candidates without the partial last chunk.

bad: each chunk of 128 elements (one warp's share) proposes its k best, and the final
merge picks the k best candidates; rows shorter than a chunk take a one-chunk path,
longer rows launch N // 128 chunks, so their last N % 128 elements are never
considered. Exact at the benchmark N = 1024; wrong whenever N > 128 and N % 128 != 0
and a top element sits in the tail.
good: a stable descending sort of the whole row.
"""
import numpy as np

DTYPE = "float32"
CHUNK = 128


def _stable_topk(x, k):
    key = np.where(np.isnan(x), 0.0, -x.astype(np.float64)) + 0.0
    return np.lexsort((key, ~np.isnan(x)), axis=-1)[..., :int(k)].astype(np.int64)


def baseline(x, k):
    return np.zeros((x.shape[0], int(k)), dtype=np.int64)


def bad(x, k):
    k = int(k)
    if x.shape[-1] <= CHUNK:
        return _stable_topk(x, k)
    n = x.shape[-1] // CHUNK * CHUNK
    cands = [c0 + _stable_topk(x[:, c0:c0 + CHUNK], min(k, CHUNK)) for c0 in range(0, n, CHUNK)]
    idx = np.concatenate(cands, axis=-1)
    vals = np.take_along_axis(x, idx, axis=-1)
    pos = _stable_topk(vals, k)
    # candidates come in index order, so a stable merge keeps ties to the lower index
    return np.take_along_axis(idx, pos, axis=-1).astype(np.int64)


def good(x, k):
    return _stable_topk(x, k)
