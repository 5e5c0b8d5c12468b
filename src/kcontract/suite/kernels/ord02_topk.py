"""Calibration of ord02-topk: ties won in arrival order.

bad: a parallel top-k whose candidates reach the final merge in the order their
threads finish: tied values keep that arrival order (emulated by a per-call shuffle
of the positions before a stable descending sort, ord_schedules.arrival_rng). Without
ties (uniform float32 inputs) it gives the right indices: passes allclose(1e-2); on
rows with ties the winners change from run to run.
good: a stable descending sort (ties to the lower index), NaN first.
"""
import numpy as np

from kcontract.suite.kernels.ord_schedules import arrival_rng

DTYPE = "float32"
DECLARE = {"deterministic": "true"}


def _stable_topk(x, k):
    key = np.where(np.isnan(x), 0.0, -x.astype(np.float64)) + 0.0
    return np.lexsort((key, ~np.isnan(x)), axis=-1)[..., :int(k)].astype(np.int64)


def baseline(x, k):
    return np.zeros((x.shape[0], int(k)), dtype=np.int64)


def bad(x, k):
    perm = np.argsort(arrival_rng().random(x.shape), axis=-1)
    shuffled = np.take_along_axis(x, perm, axis=-1)
    pos = _stable_topk(shuffled, k)
    return np.take_along_axis(perm, pos, axis=-1).astype(np.int64)


def good(x, k):
    return _stable_topk(x, k)
