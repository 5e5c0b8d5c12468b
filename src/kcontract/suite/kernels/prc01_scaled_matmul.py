"""Calibration of prc01-scaled_matmul: block scales applied per row/column only.

bad: an FP8 GEMM that treats block scaling as per-row (a) and per-column-block (b)
scaling: it applies the first K block's scales to every block. Exact at the
benchmark's K = 128 (one block): passes allclose(1e-2); wrong wherever K > 128 and
the blocks' scales differ.
good: every block scaled by its own scales, float32 accumulation, bfloat16 out.
"""
from kcontract.suite.kernels.scaled_mm_recipes import BF16, gemm, zeros

DTYPE = "float8_e4m3fn"


def baseline(a, b, scale_a, scale_b):
    return zeros(a, b)


def bad(a, b, scale_a, scale_b):
    return gemm(a, b, scale_a, scale_b, first_scales=True).astype(BF16)


def good(a, b, scale_a, scale_b):
    return gemm(a, b, scale_a, scale_b).astype(BF16)
