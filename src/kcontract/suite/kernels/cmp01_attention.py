"""Calibration of cmp01-attention: a fused (FlashAttention-style) kernel whose softmax
uses a software exp2.

Both kernels stream the keys in tiles of 16 with an online softmax (running max and sum,
rescaled per tile) in the log2 domain, as fused attention kernels do.
bad: exp2 is a degree-3 polynomial on the fractional part (the exp2 emulation used to
offload the special-function unit), relative error up to 8.8e-5: invisible to
allclose(1e-2), several times the composed tolerance of the float32 unfused composition.
good: the same fused schedule with an exact float32 exp2.
"""
import math

import numpy as np

DTYPE = "float32"
TILE = 16
LOG2E = 1.4426950408889634
# 2**f on [0, 1): cubic polynomial, max relative error 8.8e-5
_C = (np.float32(1.0), np.float32(0.695146143436431884765625),
      np.float32(0.227564394474029541015625), np.float32(0.077119089663028717041015625))


def _exp2_poly(x):
    x = np.asarray(x, dtype=np.float32)
    neg_inf = np.isneginf(x)
    xc = np.maximum(np.where(neg_inf, 0, x), np.float32(-126))
    j = np.floor(xc)
    f = (xc - j).astype(np.float32)
    p = _C[0] + f * (_C[1] + f * (_C[2] + f * _C[3]))
    return np.where(neg_inf, 0, np.ldexp(p, j.astype(np.int32))).astype(np.float32)


def _exp2(x):
    return np.exp2(np.asarray(x, dtype=np.float32))


def _flash(q, k, v, causal, exp2):
    q32, k32, v32 = (t.astype(np.float32) for t in (q, k, v))
    S, T, D = q.shape[-2], k.shape[-2], q.shape[-1]
    c = np.float32(LOG2E / math.sqrt(D))
    m = np.full(q.shape[:-1] + (1,), -np.inf, dtype=np.float32)
    l = np.zeros(q.shape[:-1] + (1,), dtype=np.float32)
    acc = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=np.float32)
    rows = np.arange(S)[:, None]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for t0 in range(0, T, TILE):
            kt, vt = k32[..., t0:t0 + TILE, :], v32[..., t0:t0 + TILE, :]
            s = np.matmul(q32, np.swapaxes(kt, -1, -2)) * c
            if causal:
                cols = np.arange(t0, t0 + kt.shape[-2])[None, :]
                s = np.where(cols <= rows + (T - S), s, -np.inf).astype(np.float32)
            m_new = np.maximum(m, np.max(s, axis=-1, keepdims=True))
            m_safe = np.where(np.isfinite(m_new), m_new, 0).astype(np.float32)
            alpha = exp2(m - m_safe)
            p = exp2(s - m_safe)
            l = l * alpha + np.sum(p, axis=-1, keepdims=True, dtype=np.float32)
            acc = acc * alpha + np.matmul(p, vt)
            m = m_new
        return (acc / l).astype(q.dtype)


def baseline(q, k, v, causal=False):
    return np.zeros_like(q)


def bad(q, k, v, causal=False):
    return _flash(q, k, v, causal, _exp2_poly)


def good(q, k, v, causal=False):
    return _flash(q, k, v, causal, _exp2)
