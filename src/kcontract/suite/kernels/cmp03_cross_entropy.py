"""Calibration of cmp03-cross_entropy: a vocabulary tiled without its last partial tile.

bad: the log-sum-exp runs over tiles of 128 classes (one block each); vocabularies of
at least a tile launch C // 128 tiles and never see the last C % 128 logits (smaller
ones take a one-tile path). Exact at the benchmark C = 512; wrong whenever C > 128 and
C % 128 != 0.
good: the whole row, shifted, float32.
"""
import numpy as np

DTYPE = "float32"
TILE = 128


def baseline(logits, target, ignore_index=-100):
    return np.zeros((), dtype=logits.dtype)


def _loss(x, target, ignore_index, dtype):
    m = np.max(x, axis=-1)
    lse = m + np.log(np.sum(np.exp(x - m[:, None]), axis=-1))
    keep = target != ignore_index
    t = np.where(keep, target, 0)
    loss = lse - np.take_along_axis(x, t[:, None], axis=-1)[:, 0]
    with np.errstate(all="ignore"):
        return np.asarray(np.sum(np.where(keep, loss, 0), dtype=np.float32)
                          / np.float32(np.count_nonzero(keep))).astype(dtype)


def bad(logits, target, ignore_index=-100):
    x = logits.astype(np.float32)
    C = x.shape[-1]
    n = C if C <= TILE else C // TILE * TILE
    lse_part = x[:, :n]
    m = np.max(lse_part, axis=-1)
    lse = m + np.log(np.sum(np.exp(lse_part - m[:, None]), axis=-1))
    keep = target != ignore_index
    t = np.where(keep, target, 0)
    loss = lse - np.take_along_axis(x, t[:, None], axis=-1)[:, 0]
    with np.errstate(all="ignore"):
        return np.asarray(np.sum(np.where(keep, loss, 0), dtype=np.float32)
                          / np.float32(np.count_nonzero(keep))).astype(logits.dtype)


def good(logits, target, ignore_index=-100):
    return _loss(logits.astype(np.float32), target, ignore_index, logits.dtype)
