"""Calibration of ord03-layernorm: split row statistics in small batches.

bad: when the batch has fewer than 16 rows, each row's mean and variance are
computed by 16 // rows blocks and merged with Chan's parallel formula (the usual
split Welford); with 16 rows or more, two passes per row. Both are float32-accurate
(pass allclose(1e-2)), but a row's statistics, hence its bits, depend on the batch
size.
good: every row on its own, two fixed-order passes (mean, then mean of squared
deviations), whatever the batch.
"""
import numpy as np

from kcontract.suite.kernels.ord_schedules import split

DTYPE = "float32"
DECLARE = {"batch_invariant": "true"}


def baseline(x, weight, bias, eps=1e-5):
    return np.zeros_like(x)


def _finish(x32, mu, var, weight, bias, eps):
    inv = (1.0 / np.sqrt(var + np.float32(eps))).astype(np.float32)
    return (x32 - mu[:, None]) * inv[:, None] * weight.astype(np.float32) \
        + bias.astype(np.float32)


def bad(x, weight, bias, eps=1e-5):
    x32 = x.astype(np.float32).reshape(-1, x.shape[-1])
    R, N = x32.shape
    blocks = max(1, 16 // max(1, R))
    with np.errstate(over="ignore", invalid="ignore"):
        if blocks == 1:
            mu = np.sum(x32, axis=-1, dtype=np.float32) / np.float32(N)
            d = x32 - mu[:, None]
            var = np.sum(d * d, axis=-1, dtype=np.float32) / np.float32(N)
        else:
            cnt = np.zeros(R, np.float32)
            mu = np.zeros(R, np.float32)
            m2 = np.zeros(R, np.float32)
            for s in split(N, blocks):
                nb = np.float32(s.stop - s.start)
                if nb == 0:
                    continue
                mb = np.sum(x32[:, s], axis=-1, dtype=np.float32) / nb
                db = x32[:, s] - mb[:, None]
                m2b = np.sum(db * db, axis=-1, dtype=np.float32)
                tot = cnt + nb
                delta = mb - mu
                mu = mu + delta * (nb / tot)
                m2 = m2 + m2b + delta * delta * (cnt * nb / tot)
                cnt = tot
            var = m2 / np.float32(N)
        return _finish(x32, mu, var, weight, bias, eps).reshape(x.shape).astype(x.dtype)


def good(x, weight, bias, eps=1e-5):
    x32 = x.astype(np.float32).reshape(-1, x.shape[-1])
    n = np.float32(x32.shape[1])
    mu = np.empty(x32.shape[0], np.float32)
    var = np.empty(x32.shape[0], np.float32)
    for i, row in enumerate(x32):
        mu[i] = np.add.reduce(row, dtype=np.float32) / n
        d = row - mu[i]
        var[i] = np.add.reduce(d * d, dtype=np.float32) / n
    with np.errstate(over="ignore", invalid="ignore"):
        return _finish(x32, mu, var, weight, bias, eps).reshape(x.shape).astype(x.dtype)
