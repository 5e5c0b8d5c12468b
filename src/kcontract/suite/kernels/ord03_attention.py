"""Calibration of ord03-attention: the split-KV count follows batch x heads.

bad: like flash-decoding heuristics, the keys are split into 32 // (batch x heads)
chunks when batch x heads is too small to fill the machine (16 chunks for one
sequence of 2 heads, 5 for three sequences, none for 16); the chunks' partial
softmax sums and outputs are rescaled and added in order in float32. Accurate to
float32 (passes allclose(1e-2)), but a sequence's bits depend on how many sequences
share the batch.
good: every (sequence, head) on its own in a fixed order: scores as float32 dot
products reduced pairwise over D, a max-subtracted softmax, and p @ v accumulated
over the keys in order.
"""
import math

import numpy as np

from kcontract.suite.kernels.ord_schedules import split

DTYPE = "float32"
DECLARE = {"batch_invariant": "true"}


def baseline(q, k, v, causal=False):
    return np.zeros_like(q)


def _mask(S, T):
    return np.arange(T)[None, :] <= np.arange(S)[:, None] + (T - S)


def bad(q, k, v, causal=False):
    q32, k32, v32 = (t.astype(np.float32) for t in (q, k, v))
    B, H, S, D = q.shape
    T = k.shape[-2]
    s = np.matmul(q32, np.swapaxes(k32, -1, -2)) * np.float32(1.0 / math.sqrt(D))
    if causal:
        s = np.where(_mask(S, T), s, np.float32(-np.inf))
    chunks = max(1, 32 // max(1, B * H))
    with np.errstate(over="ignore", invalid="ignore"):
        m = np.max(s, axis=-1)
        l = np.zeros((B, H, S), np.float32)
        o = np.zeros((B, H, S, D), np.float32)
        for sl in split(T, chunks):
            if sl.stop == sl.start:
                continue
            mc = np.max(s[..., sl], axis=-1)
            e = np.exp(s[..., sl] - mc[..., None])
            scale = np.exp(mc - m)
            l = l + np.sum(e, axis=-1, dtype=np.float32) * scale
            o = o + np.matmul(e, v32[..., sl, :]) * scale[..., None]
        return (o / l[..., None]).astype(q.dtype)


def good(q, k, v, causal=False):
    q32, k32, v32 = (t.astype(np.float32) for t in (q, k, v))
    B, H, S, D = q.shape
    T = k.shape[-2]
    scale = np.float32(1.0 / math.sqrt(D))
    out = np.empty((B, H, S, D), np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        for b in range(B):
            for h in range(H):
                s = np.add.reduce(q32[b, h][:, None, :] * k32[b, h][None, :, :], axis=-1,
                                  dtype=np.float32) * scale
                if causal:
                    s = np.where(_mask(S, T), s, np.float32(-np.inf))
                e = np.exp(s - np.max(s, axis=-1, keepdims=True))
                p = e / np.add.reduce(e, axis=-1, keepdims=True, dtype=np.float32)
                out[b, h] = np.add.reduce(p[:, :, None] * v32[b, h][None, :, :], axis=1,
                                          dtype=np.float32)
    return out.astype(q.dtype)
