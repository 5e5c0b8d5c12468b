"""Two kernels of the fused residual-add + RMSNorm op (fused_ops.add_rmsnorm)."""
import ml_dtypes
import numpy as np


def add_rmsnorm(x, residual, weight, eps=1e-6):
    """The sum, the mean of squares and the scaling in float32: conforms."""
    h = x.astype(np.float32) + residual.astype(np.float32)
    ms = np.mean(h * h, axis=-1, keepdims=True, dtype=np.float32)
    y = h / np.sqrt(ms + np.float32(eps)) * weight.astype(np.float32)
    return y.astype(x.dtype)


def add_rmsnorm_bf16_stats(x, residual, weight, eps=1e-6):
    """Accumulates the squares in bfloat16 (a narrow workspace: partial sums of 16
    squares kept in bfloat16, then added in float32): passes allclose(1e-2) on uniform
    inputs, violates the declared float32 accumulator."""
    h = x.astype(np.float32) + residual.astype(np.float32)
    sq = (h * h).astype(ml_dtypes.bfloat16)
    R, N = sq.shape
    chunk = 16
    padded = np.concatenate([sq, np.zeros((R, (-N) % chunk), sq.dtype)], axis=1)
    blocks = padded.reshape(R, -1, chunk)
    part = np.zeros(blocks.shape[:2], dtype=ml_dtypes.bfloat16)
    for j in range(chunk):
        part = (part.astype(np.float32) + blocks[..., j].astype(np.float32)).astype(part.dtype)
    ms = part.astype(np.float32).sum(axis=-1, keepdims=True) / np.float32(N)
    y = h / np.sqrt(ms + np.float32(eps)) * weight.astype(np.float32)
    return y.astype(x.dtype)
