"""Six matmul recipes, written the way kernels do them (not with kcontract's emulation).

Each takes float32 ``a`` (M, K) and ``b`` (K, N) and returns float32 (M, N).  They
are test data for the precision fingerprint: it must name each recipe exactly.

========================  ==================================================
matmul_fp32_fp32          honest: fp32 operands, fp32 accumulation (BLAS)
matmul_tf32_fp32          operands rounded to TF32 (RNE on the bit pattern)
matmul_bf16_fp32          operands cast to bfloat16, fp32 accumulation
matmul_fp16_fp32          operands cast to float16, fp32 accumulation
matmul_fp32_fp16acc       fp32 products added into a float16 accumulator
matmul_fp32_bf16acc       fp32 products added into a bfloat16 accumulator
========================  ==================================================

Variants with other summation orders (blocked, pairwise) check that the
fingerprint does not depend on the order.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np


def _tf32(x: np.ndarray) -> np.ndarray:
    """Round float32 to TF32 (10 stored fraction bits) with ties to even, on the bits."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    lsb = (bits >> np.uint32(13)) & np.uint32(1)
    r = (bits + np.uint32(0x0FFF) + lsb) & np.uint32(0xFFFFE000)
    r = np.where(np.isfinite(x), r, bits).astype(np.uint32)
    return r.view(np.float32)


def matmul_fp32_fp32(a, b):
    return np.matmul(a, b)


def matmul_tf32_fp32(a, b):
    return np.matmul(_tf32(a), _tf32(b))


def matmul_bf16_fp32(a, b):
    a16 = a.astype(ml_dtypes.bfloat16).astype(np.float32)
    b16 = b.astype(ml_dtypes.bfloat16).astype(np.float32)
    return np.matmul(a16, b16)


def matmul_fp16_fp32(a, b):
    with np.errstate(over="ignore", invalid="ignore"):
        a16 = a.astype(np.float16).astype(np.float32)
        b16 = b.astype(np.float16).astype(np.float32)
        return np.matmul(a16, b16)


def _narrow_acc(a, b, acc_dtype):
    """Sequential over K, vectorised over (M, N): acc = narrow(acc + fp32 product)."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=acc_dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(a.shape[1]):
            prod = a[:, k:k + 1] * b[k:k + 1, :]  # float32 product
            acc = (acc.astype(np.float32) + prod).astype(acc_dtype)
    return acc.astype(np.float32)


def matmul_fp32_fp16acc(a, b):
    return _narrow_acc(a, b, np.float16)


def matmul_fp32_bf16acc(a, b):
    return _narrow_acc(a, b, ml_dtypes.bfloat16)


# -- order variants ------------------------------------------------------------------------

def _pairwise(terms: np.ndarray, acc_dtype) -> np.ndarray:
    """Pairwise (tree) reduction over the last axis, each partial rounded to acc_dtype."""
    with np.errstate(over="ignore", invalid="ignore"):
        t = terms.astype(acc_dtype)
        while t.shape[-1] > 1:
            if t.shape[-1] % 2:
                t = np.concatenate([t, np.zeros(t.shape[:-1] + (1,), acc_dtype)], axis=-1)
            pair = t[..., 0::2].astype(np.float32) + t[..., 1::2].astype(np.float32)
            t = pair.astype(acc_dtype)
    return t[..., 0].astype(np.float32)


def matmul_fp32_fp16acc_pairwise(a, b):
    """fp16 accumulation in a tree order (products rounded to fp16 first)."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        terms = a[:, None, :] * b.T[None, :, :]
    return _pairwise(terms, np.float16)


def matmul_fp32_bf16acc_blocked(a, b, block: int = 32):
    """Blocks of K accumulated sequentially in bf16, block partials combined in bf16."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    K = a.shape[1]
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=ml_dtypes.bfloat16)
    for k0 in range(0, K, block):
        part = _narrow_acc(a[:, k0:k0 + block], b[k0:k0 + block, :], ml_dtypes.bfloat16)
        acc = (acc.astype(np.float32) + part).astype(ml_dtypes.bfloat16)
    return acc.astype(np.float32)


def matmul_fp16_fp32_float64(a, b):
    """fp16 operands, but a float64 accumulator (still 'fp16 operands, wide accumulation')."""
    with np.errstate(over="ignore", invalid="ignore"):
        a16 = a.astype(np.float16).astype(np.float64)
        b16 = b.astype(np.float16).astype(np.float64)
        return np.matmul(a16, b16).astype(np.float32)


RECIPES = {
    "matmul_fp32_fp32": ("float32", "float32"),
    "matmul_tf32_fp32": ("tfloat32", "float32"),
    "matmul_bf16_fp32": ("bfloat16", "float32"),
    "matmul_fp16_fp32": ("float16", "float32"),
    "matmul_fp32_fp16acc": ("float32", "float16"),
    "matmul_fp32_bf16acc": ("float32", "bfloat16"),
}


# -- other precision failure modes (test data for the C-PRC-02/03/04 signatures) --------------

_TINY32 = np.float32(np.finfo(np.float32).tiny)


def matmul_ftz_outputs(a, b):
    """Exact fp32 product whose subnormal results are stored as zero (FTZ, emulated)."""
    c = np.matmul(a, b)
    return np.where(np.abs(c) < _TINY32, np.float32(0), c).astype(a.dtype)


def matmul_daz_ftz(a, b):
    """Both: subnormal operands read as zero and subnormal results stored as zero."""
    a = np.where(np.abs(a) < _TINY32, np.float32(0), a).astype(a.dtype)
    b = np.where(np.abs(b) < _TINY32, np.float32(0), b).astype(b.dtype)
    return matmul_ftz_outputs(a, b)


def _daz32(a):
    return np.where(np.abs(a) < np.finfo(a.dtype).tiny, 0, a).astype(a.dtype)


def layernorm_daz(x, weight, bias, eps=1e-5):
    """Two-pass fp32 layernorm on inputs whose subnormals are read as zero (DAZ, emulated)."""
    x = _daz32(x)
    mu = np.mean(x, axis=-1, keepdims=True, dtype=np.float32)
    d = x - mu
    var = np.mean(d * d, axis=-1, keepdims=True, dtype=np.float32)
    return (d / np.sqrt(var + np.float32(eps)) * weight + bias).astype(x.dtype)


def _attention64(q, k, v, flush_p=False):
    q64, k64, v64 = (np.asarray(a, np.float64) for a in (q, k, v))
    s = np.matmul(q64, np.swapaxes(k64, -1, -2)) / math.sqrt(q.shape[-1])
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    p = e / np.sum(e, axis=-1, keepdims=True)
    if flush_p:
        p = np.where(p < np.finfo(q.dtype).tiny, 0.0, p)
    return np.matmul(p, v64).astype(q.dtype)


def attention_daz(q, k, v, causal=False):
    """Attention in float64 on operands whose subnormals are read as zero (DAZ, emulated)."""
    return _attention64(_daz32(q), _daz32(k), _daz32(v))


def attention_flush_probabilities(q, k, v, causal=False):
    """Attention in float64 whose probabilities below the smallest normal become zero (an
    exponential that underflows to zero instead of to a subnormal); results kept."""
    return _attention64(q, k, v, flush_p=True)


def linear_gelu_ftz(x, w, b):
    """gelu(x @ w + b) in float64, results below the smallest normal stored as zero (FTZ)."""
    pre = np.matmul(np.asarray(x, np.float64), np.asarray(w, np.float64)) + b.astype(np.float64)
    y = 0.5 * pre * (1.0 + np.vectorize(math.erf)(pre / math.sqrt(2.0)))
    return np.where(np.abs(y) < np.finfo(x.dtype).tiny, 0.0, y).astype(x.dtype)


def sum_daz(x):
    """Subnormal terms read as zero (DAZ, emulated), exact fp32 sum otherwise."""
    x = np.where(np.abs(x) < _TINY32, np.float32(0), x).astype(x.dtype)
    return np.sum(x, axis=-1, dtype=np.float32).astype(x.dtype)


def layernorm_one_pass_clamped(x, weight, bias, eps=1e-5):
    """E[x^2] - E[x]^2 with the usual 'fix' (clamp at zero): finite but wrong on offsets."""
    mu = np.mean(x, axis=-1, keepdims=True, dtype=np.float32)
    var = np.maximum(np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32) - mu * mu, 0)
    return ((x - mu) / np.sqrt(var + np.float32(eps)) * weight + bias).astype(x.dtype)


def layernorm_two_pass_fp16(x, weight, bias, eps=1e-5):
    """The stable two-pass formulation, computed in float16 (inputs, statistics and the
    normalisation): its error grows like kappa, at float16's constant."""
    with np.errstate(all="ignore"):
        h = x.astype(np.float16)
        mu = np.mean(h, axis=-1, keepdims=True, dtype=np.float16)
        d = h - mu
        var = np.mean(d * d, axis=-1, keepdims=True, dtype=np.float16)
        y = d / np.sqrt(var + np.float16(eps)) * weight.astype(np.float16) + bias.astype(np.float16)
        return y.astype(x.dtype)


def _welford(x, acc):
    xa = x.astype(acc)
    mean = np.zeros(x.shape[:-1], acc)
    m2 = np.zeros(x.shape[:-1], acc)
    for i in range(x.shape[-1]):
        delta = xa[..., i] - mean
        mean = (mean + delta / acc(i + 1)).astype(acc)
        m2 = (m2 + delta * (xa[..., i] - mean)).astype(acc)
    return mean[..., None], (m2 / acc(x.shape[-1]))[..., None]


def layernorm_welford(x, weight, bias, eps=1e-5):
    """Welford's one-pass update (mean and centred second moment), in float32: stable."""
    mean, var = _welford(x, np.float32)
    return ((x - mean) / np.sqrt(var + np.float32(eps)) * weight + bias).astype(x.dtype)


def layernorm_welford_fp16(x, weight, bias, eps=1e-5):
    """Welford's update with float16 statistics and normalisation: stable, at float16's
    constant."""
    with np.errstate(all="ignore"):
        h = np.float16
        mean, var = _welford(x.astype(h), h)
        y = (x.astype(h) - mean) / np.sqrt(var + h(eps)) * weight.astype(h) + bias.astype(h)
        return y.astype(x.dtype)


def layernorm_welford_bf16(x, weight, bias, eps=1e-5):
    """Welford's update with bfloat16 statistics: stable, at bfloat16's constant."""
    with np.errstate(all="ignore"):
        bf = ml_dtypes.bfloat16
        mean, var = _welford(x.astype(bf), bf)
        xb = x.astype(bf)
        y = (xb - mean) / np.sqrt(var + bf(eps)) * weight.astype(bf) + bias.astype(bf)
        return y.astype(x.dtype)


def cast_bf16_round_half_away(x, dtype="bfloat16"):
    """float32 -> bfloat16 by adding half an ulp to the bits and truncating: ties away
    from zero (the other classic bit trick)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    top = ((bits + np.uint32(0x8000)) >> np.uint32(16)).astype(np.uint16)
    return top.view(ml_dtypes.bfloat16)
