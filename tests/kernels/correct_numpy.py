"""Correct numpy kernels for every op: compute in float32 (float64 for float64
inputs), round once to the input's dtype."""
import math

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def _work(x):
    return np.float64 if x.dtype == np.float64 else np.float32


def matmul(a, b):
    w = _work(a)
    return np.matmul(a.astype(w), b.astype(w)).astype(a.dtype)


def sum(x):  # noqa: A001 - the op's name
    w = _work(x)
    return np.sum(x.astype(w), axis=-1).astype(x.dtype)


def _softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def softmax(x):
    return _softmax(x.astype(_work(x))).astype(x.dtype)


def layernorm(x, weight, bias, eps=1e-5):
    w = _work(x)
    xf = x.astype(w)
    mu = np.mean(xf, axis=-1, keepdims=True)
    var = np.mean((xf - mu) ** 2, axis=-1, keepdims=True)
    y = (xf - mu) / np.sqrt(var + w(eps)) * weight.astype(w) + bias.astype(w)
    return y.astype(x.dtype)


def attention(q, k, v, causal=False):
    w = _work(q)
    qf, kf, vf = q.astype(w), k.astype(w), v.astype(w)
    s = np.matmul(qf, np.swapaxes(kf, -1, -2)) / w(math.sqrt(q.shape[-1]))
    if causal:
        S, T = q.shape[-2], k.shape[-2]
        mask = np.arange(T)[None, :] <= np.arange(S)[:, None] + (T - S)
        s = np.where(mask, s, -np.inf)
    return np.matmul(_softmax(s), vf).astype(q.dtype)


def embedding(table, indices):
    if np.any(indices < 0) or np.any(indices >= table.shape[0]):
        raise IndexError("index out of range in embedding")
    return table[indices]


def _gelu(x):
    x64 = x.astype(np.float64)
    return 0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)).astype(np.float64))


def gelu(x):
    return _gelu(x).astype(x.dtype)


def linear_gelu(x, w, b):
    wk = _work(x)
    pre = np.matmul(x.astype(wk), w.astype(wk)) + b.astype(wk)
    return _gelu(pre).astype(x.dtype)


def cast(x, dtype="float32"):
    import ml_dtypes
    target = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    return x.astype(target)


# -- the LLM-era ops (rmsnorm, rope, silu_mul, cross_entropy, scaled_matmul, conv2d,
#    cumsum, topk) ----------------------------------------------------------------

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


def _dequantised(a, b, scale_a, scale_b):
    K, N = b.shape
    ka = np.minimum(np.arange(K) // 128, scale_a.shape[1] - 1)
    kb = np.minimum(np.arange(K) // 128, scale_b.shape[0] - 1)
    nb = np.minimum(np.arange(N) // 128, scale_b.shape[1] - 1)
    A = a.astype(np.float32) * scale_a[:, ka]
    B = b.astype(np.float32) * scale_b[kb][:, nb]
    return A, B


def scaled_matmul(a, b, scale_a, scale_b):
    import ml_dtypes
    A, B = _dequantised(a, b, scale_a, scale_b)
    return (A @ B).astype(ml_dtypes.bfloat16)


def scaled_matmul_f32(a, b, scale_a, scale_b):
    A, B = _dequantised(a, b, scale_a, scale_b)
    return (A @ B).astype(np.float32)


def conv2d(x, w, stride, padding):
    s, p = int(stride), int(padding)
    wk = _work(x)
    xp = np.pad(x.astype(wk), ((0, 0), (0, 0), (p, p), (p, p)))
    KH, KW = w.shape[-2:]
    win = np.lib.stride_tricks.sliding_window_view(xp, (KH, KW), axis=(2, 3))[:, :, ::s, ::s]
    return np.einsum("ncijpq,ocpq->noij", win, w.astype(wk)).astype(x.dtype)


def cross_entropy_clamp(logits, target, ignore_index=-100):
    """Out-of-range targets clamped into [0, C) (declare oob=clamp)."""
    t = np.where(target == ignore_index, target, np.clip(target, 0, logits.shape[-1] - 1))
    return cross_entropy(logits, t, ignore_index)
