"""Calibration kernels for ``kcontract fingerprint``: emulated matrix-unit designs
(and the ordinary stacks) as kernels the isolated worker imports."""
import numpy as np

from kcontract.fingerprint.designs import PUBLISHED, Design

NARROW14 = Design("narrow14", accumulator_bits=14, accumulator_rounding="toward_zero",
                  output_format="float32")


def narrow14_matmul(a, b):
    """fp32 operands, a 14-bit truncating accumulator, fp32 out."""
    return NARROW14.matmul(a, b)


def hopper_fp8_promoted(a, b):
    return PUBLISHED["hopper-fp8-promoted"].matmul(a, b)


def numpy_matmul(a, b):
    return np.matmul(a, b)


def numpy_sum(x):
    return np.sum(x, axis=-1)


def torch_matmul(a, b):
    return a @ b


def torch_matmul_medium(a, b):
    """fp32 matmul under set_float32_matmul_precision('medium'), restored afterwards."""
    import torch
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        return a @ b
    finally:
        torch.set_float32_matmul_precision(old)


def crashing(a, b):
    import os
    os._exit(3)


# -- the matmul inside linear_gelu and attention ----------------------------------------------

def _gelu(pre):
    import math
    erf = np.frompyfunc(math.erf, 1, 1)
    p = np.asarray(pre, dtype=np.float64)
    return 0.5 * p * (1.0 + erf(p / math.sqrt(2.0)).astype(np.float64))


def linear_gelu_fp32(x, w, b):
    """fp32 operands and accumulation, then + b and gelu."""
    return _gelu(np.matmul(x, w) + b).astype(x.dtype)


def linear_gelu_bf16(x, w, b):
    """x and w rounded to bfloat16 (autocast-style), fp32 accumulation."""
    import ml_dtypes
    xb = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    wb = w.astype(ml_dtypes.bfloat16).astype(np.float32)
    return _gelu(np.matmul(xb, wb) + b).astype(x.dtype)


def _softmax(s):
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def attention_fp32(q, k, v, causal=False):
    scale = np.float32(1.0 / np.sqrt(q.shape[-1]))
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    return np.matmul(_softmax(s).astype(np.float32), v).astype(q.dtype)


def attention_fp16_scores(q, k, v, causal=False):
    """The scores q k^T / sqrt(D) stored in float16 before the softmax."""
    scale = np.float32(1.0 / np.sqrt(q.shape[-1]))
    with np.errstate(over="ignore"):
        s = (np.matmul(q, np.swapaxes(k, -1, -2)) * scale).astype(np.float16)
    p = _softmax(s.astype(np.float32)).astype(np.float32)
    return np.matmul(p, v).astype(q.dtype)


def attention_fp16_pv(q, k, v, causal=False):
    """p @ v accumulated in a float16 register, one key at a time."""
    scale = np.float32(1.0 / np.sqrt(q.shape[-1]))
    p = _softmax(np.matmul(q, np.swapaxes(k, -1, -2)) * scale).astype(np.float32)
    o = np.zeros(q.shape[:-1] + (v.shape[-1],), dtype=np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(k.shape[-2]):
            o = (o.astype(np.float32) + p[..., :, t, None] * v[..., None, t, :]).astype(np.float16)
    return o.astype(q.dtype)
