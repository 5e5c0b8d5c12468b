"""Calibration of exc01-topk: NaN ranked smallest.

bad: the top k of a stable ascending sort of -x (numpy's sort puts NaN last, so NaN
ranks below every number and drops out of the top k). Rand inputs hold no NaN: passes
allclose(1e-2).
good: NaN first, then a stable descending sort (ties to the lower index).
"""
import numpy as np

DTYPE = "float32"


def baseline(x, k):
    return np.zeros((x.shape[0], int(k)), dtype=np.int64)


def bad(x, k):
    return np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[..., :int(k)].astype(np.int64)


def good(x, k):
    key = np.where(np.isnan(x), 0.0, -x.astype(np.float64)) + 0.0
    return np.lexsort((key, ~np.isnan(x)), axis=-1)[..., :int(k)].astype(np.int64)
