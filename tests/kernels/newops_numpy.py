"""Correct numpy kernels for the LLM-era ops (imported by correct_numpy.py): compute
in float32 (float64 for float64 inputs), round once to the output's dtype."""
import numpy as np


def _work(x):
    return np.float64 if x.dtype == np.float64 else np.float32


def rmsnorm(x, weight, eps=1e-6):
    w = _work(x)
    xf = x.astype(w)
    ms = np.mean(xf * xf, axis=-1, keepdims=True)
    return (xf / np.sqrt(ms + w(eps)) * weight.astype(w)).astype(x.dtype)


def silu_mul(gate, up):
    g = gate.astype(_work(gate))
    with np.errstate(all="ignore"):
        return (g / (1 + np.exp(-g)) * up.astype(g.dtype)).astype(gate.dtype)


def cumsum(x):
    return np.cumsum(x.astype(_work(x)), axis=-1).astype(x.dtype)


def rope(x, cos, sin):
    w = _work(x)
    P = cos.shape[-1]
    xf, c, s = x.astype(w), cos.astype(w), sin.astype(w)
    x1, x2 = xf[..., :P], xf[..., P:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).astype(x.dtype)


def topk(x, k):
    key = np.where(np.isnan(x), 0.0, -x.astype(np.float64)) + 0.0
    return np.lexsort((key, ~np.isnan(x)), axis=-1)[..., :int(k)].astype(np.int64)


def cross_entropy(logits, target, ignore_index=-100):
    if np.any(((target < 0) | (target >= logits.shape[-1])) & (target != ignore_index)):
        raise IndexError("target out of range")
    w = _work(logits)
    x = logits.astype(w)
    m = np.max(x, axis=-1)
    lse = m + np.log(np.sum(np.exp(x - m[:, None]), axis=-1))
    keep = target != ignore_index
    t = np.where(keep, target, 0)
    loss = np.where(keep, lse - np.take_along_axis(x, t[:, None], axis=-1)[:, 0], 0)
    with np.errstate(all="ignore"):
        return np.asarray(np.sum(loss) / w(np.count_nonzero(keep))).astype(logits.dtype)
