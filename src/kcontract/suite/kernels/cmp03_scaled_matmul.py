"""Calibration of cmp03-scaled_matmul: no partial last K block.

bad: an FP8 GEMM written for K a multiple of its 128-wide scale blocks: it runs
K // 128 blocks (one block when K < 128) and never adds the last K % 128 products.
Exact at the benchmark's K = 128; wrong whenever K > 128 and K % 128 != 0.
good: every block, the partial last one included.
"""
from kcontract.suite.kernels.scaled_mm_recipes import BF16, BLOCK, gemm, zeros

DTYPE = "float8_e4m3fn"


def baseline(a, b, scale_a, scale_b):
    return zeros(a, b)


def bad(a, b, scale_a, scale_b):
    return gemm(a, b, scale_a, scale_b, blocks=max(1, a.shape[1] // BLOCK)).astype(BF16)


def good(a, b, scale_a, scale_b):
    return gemm(a, b, scale_a, scale_b).astype(BF16)
