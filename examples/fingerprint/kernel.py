"""Two fp8 GEMMs with a narrow accumulator, emulated bit for bit in numpy: what
``kcontract fingerprint`` recovers from them is in this folder's README."""
from kcontract.fingerprint.designs import PUBLISHED


def fp8_gemm(a, b):
    """fp8 e4m3 operands, a 14-bit truncating accumulator for the whole reduction."""
    return PUBLISHED["hopper-fp8"].matmul(a, b)


def fp8_gemm_promoted(a, b):
    """The same, with partial sums promoted to an fp32 accumulator every 128 products."""
    return PUBLISHED["hopper-fp8-promoted"].matmul(a, b)


def matmul_split_k(a, b):
    """fp32 matmul computed in blocks of 64 products (fp32), the blocks' partial sums
    added into an fp16 workspace: what C-PRC-01 catches and its violation names."""
    import numpy as np
    acc = np.zeros((a.shape[0], b.shape[1]), dtype=np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        for k0 in range(0, a.shape[1], 64):
            part = np.matmul(a[:, k0:k0 + 64], b[k0:k0 + 64])
            acc = (acc.astype(np.float32) + part).astype(np.float16)
    return acc.astype(a.dtype)
