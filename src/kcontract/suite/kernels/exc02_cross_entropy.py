"""Calibration of exc02-cross_entropy: out-of-range targets skipped as if ignored.

bad: a fused cross-entropy that masks every target outside [0, C) the way it masks
ignore_index: those rows silently drop out of the mean, where the declared policy
(raise) wants an exception. Rand inputs hold only valid targets: passes allclose(1e-2).
good: raises IndexError for a target outside [0, C) that is not ignore_index.
"""
import numpy as np

DTYPE = "float32"


def baseline(logits, target, ignore_index=-100):
    return np.zeros((), dtype=logits.dtype)


def _loss(logits, target, keep):
    x = logits.astype(np.float32)
    m = np.max(x, axis=-1)
    lse = m + np.log(np.sum(np.exp(x - m[:, None]), axis=-1))
    t = np.where(keep, target, 0)
    loss = np.where(keep, lse - np.take_along_axis(x, t[:, None], axis=-1)[:, 0], 0)
    with np.errstate(all="ignore"):
        return np.asarray(np.sum(loss, dtype=np.float32)
                          / np.float32(np.count_nonzero(keep))).astype(logits.dtype)


def bad(logits, target, ignore_index=-100):
    keep = (target != ignore_index) & (target >= 0) & (target < logits.shape[-1])
    return _loss(logits, target, keep)


def good(logits, target, ignore_index=-100):
    bad_rows = (target != ignore_index) & ((target < 0) | (target >= logits.shape[-1]))
    if np.any(bad_rows):
        raise IndexError(f"target {int(target[bad_rows][0])} out of range [0, {logits.shape[-1]})")
    return _loss(logits, target, target != ignore_index)
