"""Calibration of prc01-scaled_matmul_f32: a 14-bit FP8 accumulator.

bad: the products of each K block are added one by one into an accumulator that keeps
14 significand bits, and the scaled block sums are added into it too (the limited
accumulation of FP8 tensor cores, without promotion to float32). About 2^-9 relative at
K = 4096; at the benchmark's K = 128 about 2^-12: passes allclose(1e-2).
good: float32 accumulation of the block-scaled partial sums.
"""
import numpy as np

from kcontract.suite.kernels.scaled_mm_recipes import gemm, zeros

DTYPE = "float8_e4m3fn"


def baseline(a, b, scale_a, scale_b):
    return zeros(a, b, np.float32)


def bad(a, b, scale_a, scale_b):
    return gemm(a, b, scale_a, scale_b, acc_bits=14)


def good(a, b, scale_a, scale_b):
    return gemm(a, b, scale_a, scale_b)
