"""Calibration of prc02-cross_entropy: log-sum-exp without the shift.

bad: loss_r = log(sum(exp(x))) - x[target], exp applied to the raw logits in float32:
exact enough for rand logits in [0, 1) (passes allclose(1e-2)), but exp overflows to
Inf beyond 88.7 (the offset and logits families): Inf or NaN losses.
good: the shifted log-sum-exp, float32.
"""
import numpy as np

DTYPE = "float32"


def baseline(logits, target, ignore_index=-100):
    return np.zeros((), dtype=logits.dtype)


def _mean(loss, target, ignore_index, dtype):
    keep = target != ignore_index
    with np.errstate(all="ignore"):
        return np.asarray(np.sum(np.where(keep, loss, 0), dtype=np.float32)
                          / np.float32(np.count_nonzero(keep))).astype(dtype)


def _picked(x, target, ignore_index):
    t = np.where(target == ignore_index, 0, target)
    return np.take_along_axis(x, t[:, None], axis=-1)[:, 0]


def bad(logits, target, ignore_index=-100):
    x = logits.astype(np.float32)
    with np.errstate(all="ignore"):
        lse = np.log(np.sum(np.exp(x), axis=-1))
    return _mean(lse - _picked(x, target, ignore_index), target, ignore_index, logits.dtype)


def good(logits, target, ignore_index=-100):
    x = logits.astype(np.float32)
    m = np.max(x, axis=-1)
    lse = m + np.log(np.sum(np.exp(x - m[:, None]), axis=-1))
    return _mean(lse - _picked(x, target, ignore_index), target, ignore_index, logits.dtype)
