"""Shared emulation for the scaled_matmul calibration kernels: the way an FP8 GEMM
walks K in blocks of 128, forms each block's fp8 x fp8 products exactly in float32,
scales the block's partial sum and adds it into an accumulator."""
import ml_dtypes
import numpy as np

BLOCK = 128
BF16 = np.dtype(ml_dtypes.bfloat16)


def _scale_rows(scale_a, kb):
    return scale_a[:, min(kb, scale_a.shape[1] - 1)][:, None]


def _scale_cols(scale_b, kb, N):
    row = scale_b[min(kb, scale_b.shape[0] - 1)]
    return np.repeat(row, BLOCK)[:N][None, :] if row.size > 1 else row[None, :1]


def round_bits(x, bits):
    """x (float64) rounded to nearest with a ``bits``-bit significand."""
    m, e = np.frexp(x)
    return np.ldexp(np.round(m * 2.0 ** bits) / 2.0 ** bits, e)


def gemm(a, b, scale_a, scale_b, *, blocks=None, acc_bits=None, first_scales=False):
    """The blocked FP8 GEMM in float32. ``blocks``: how many K blocks to run (default
    all); ``acc_bits``: emulate an accumulator with that many significand bits (every
    addition rounded to it); ``first_scales``: use the first K block's scales for every
    block (a kernel that ignores the K-blocks of the scales)."""
    M, K = a.shape
    N = b.shape[1]
    af, bf = a.astype(np.float32), b.astype(np.float32)
    sa, sb = scale_a.astype(np.float32), scale_b.astype(np.float32)
    nblk = -(-K // BLOCK) if blocks is None else blocks
    acc = np.zeros((M, N), dtype=np.float32 if acc_bits is None else np.float64)
    for kb in range(nblk):
        sl = slice(kb * BLOCK, (kb + 1) * BLOCK)
        s = 0 if first_scales else kb
        scale = _scale_rows(sa, s) * _scale_cols(sb, s, N)
        if acc_bits is None:
            acc += (af[:, sl] @ bf[sl]) * scale
        else:
            # the block's products added one by one into a narrow accumulator, then
            # scaled into it
            part = np.zeros((M, N))
            for k in range(sl.start, min(sl.stop, K)):
                part = round_bits(part + np.outer(af[:, k], bf[k]).astype(np.float64), acc_bits)
            acc = round_bits(acc + part * scale.astype(np.float64), acc_bits)
    return acc.astype(np.float32)


def zeros(a, b, out=BF16):
    return np.zeros((a.shape[0], b.shape[1]), dtype=out)
