"""A user's own bfloat16 matmul kernels (for the worked example of a user contract)."""
import ml_dtypes
import numpy as np


def matmul_bf16(a, b):
    """bfloat16 operands, float32 accumulation, one rounding to bfloat16: as declared."""
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(ml_dtypes.bfloat16)


def matmul_bf16_acc(a, b):
    """Accumulates in bfloat16 (rounds after every 64-long partial sum): breaks the contract."""
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=ml_dtypes.bfloat16)
    for k0 in range(0, a.shape[1], 64):
        part = np.matmul(a[:, k0:k0 + 64].astype(np.float32), b[k0:k0 + 64].astype(np.float32))
        acc = (acc.astype(np.float32) + part).astype(ml_dtypes.bfloat16)
    return acc
