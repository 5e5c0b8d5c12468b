"""Calibration of cmp03-attention: key tiles of 16 without a remainder tile.

bad: a fused kernel streaming keys in tiles of 16 (online softmax) whose loop bound is
T // 16 * 16: the last T % 16 keys are never seen. Exact at the benchmarked T = 64;
wrong whenever T % 16 != 0 (and NaN when T < 16: no tile at all).
good: the same schedule with a masked remainder tile.
"""
import math

import numpy as np

DTYPE = "float32"
TILE = 16


def _flash(q, k, v, causal, stop):
    q32, k32, v32 = (t.astype(np.float32) for t in (q, k, v))
    S, T = q.shape[-2], k.shape[-2]
    scale = np.float32(1.0 / math.sqrt(q.shape[-1]))
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=np.float32)
    l = np.zeros(q.shape[:-1] + (1,), dtype=np.float32)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=np.float32)
    rows = np.arange(S)[:, None]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for t0 in range(0, stop, TILE):
            kt, vt = k32[..., t0:t0 + TILE, :], v32[..., t0:t0 + TILE, :]
            s = np.matmul(q32, np.swapaxes(kt, -1, -2)) * scale
            if causal:
                cols = np.arange(t0, t0 + kt.shape[-2])[None, :]
                s = np.where(cols <= rows + (T - S), s, -np.inf).astype(np.float32)
            m_new = np.maximum(m, np.max(s, axis=-1, keepdims=True))
            m_safe = np.where(np.isfinite(m_new), m_new, 0).astype(np.float32)
            alpha = np.exp(m - m_safe)
            p = np.exp(s - m_safe)
            l = l * alpha + np.sum(p, axis=-1, keepdims=True, dtype=np.float32)
            acc = acc * alpha + np.matmul(p, vt)
            m = m_new
        return (acc / l).astype(q.dtype)


def baseline(q, k, v, causal=False):
    return np.zeros_like(q)


def bad(q, k, v, causal=False):
    T = k.shape[-2]
    return _flash(q, k, v, causal, T // TILE * TILE)


def good(q, k, v, causal=False):
    return _flash(q, k, v, causal, k.shape[-2])
