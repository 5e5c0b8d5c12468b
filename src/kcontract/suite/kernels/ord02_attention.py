"""Calibration of ord02-attention: split-KV (flash-decoding) with an atomic combine.

bad: the keys of each (batch, head) are split into 4 chunks; each chunk computes its
local maximum m_s, normaliser l_s and unnormalised output o_s in float32, and the
chunks are combined into l = sum l_s exp(m_s - m) and o = sum o_s exp(m_s - m) with
atomic adds, one order per head that changes from call to call (emulated: see
ord_schedules). Whole query rows of the heads whose order changed move in their
last bits between runs. Accurate to float32: passes allclose(1e-2).
good: one fixed-order float32 attention (max-subtracted softmax, then p @ v).
"""
import math

import numpy as np

from kcontract.suite.kernels.ord_schedules import accumulate, arrival_orders, arrival_rng, split

DTYPE = "float32"
CHUNKS = 4


def baseline(q, k, v, causal=False):
    return np.zeros_like(q)


def _scores(q, k, causal):
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(1.0 / math.sqrt(q.shape[-1]))
    if causal:
        S, T = q.shape[-2], k.shape[-2]
        keep = np.arange(T)[None, :] <= np.arange(S)[:, None] + (T - S)
        s = np.where(keep, s, np.float32(-np.inf))
    return s.astype(np.float32)


def bad(q, k, v, causal=False):
    q32, k32, v32 = (t.astype(np.float32) for t in (q, k, v))
    s = _scores(q32, k32, causal)  # (B, H, S, T)
    B, H, S, T = s.shape
    with np.errstate(over="ignore", invalid="ignore"):
        m = np.max(s, axis=-1)  # exact: order-free
        ls, os = [], []
        for sl in split(T, CHUNKS):
            if sl.stop == sl.start:
                ls.append(np.zeros((B, H, S), np.float32))
                os.append(np.zeros((B, H, S, q.shape[-1]), np.float32))
                continue
            ms = np.max(s[..., sl], axis=-1)
            e = np.exp(s[..., sl] - ms[..., None])
            scale = np.exp(ms - m)  # the rescale each chunk applies before its atomic add
            ls.append(np.sum(e, axis=-1, dtype=np.float32) * scale)
            os.append(np.matmul(e, v32[..., sl, :]) * scale[..., None])
        orders = arrival_orders(arrival_rng(), B * H, CHUNKS)
        l = accumulate(np.stack(ls).reshape(CHUNKS, B * H * S), orders, 0, S)
        o = accumulate(np.stack(os).reshape(CHUNKS, B * H * S, -1), orders, 0, S)
        out = o / l[:, None]
    return out.reshape(q.shape).astype(q.dtype)


def good(q, k, v, causal=False):
    q32, k32, v32 = (t.astype(np.float32) for t in (q, k, v))
    s = _scores(q32, k32, causal)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(s - np.max(s, axis=-1, keepdims=True))
        p = e / np.sum(e, axis=-1, keepdims=True, dtype=np.float32)
        return np.matmul(p, v32).astype(q.dtype)
