"""Calibration of exc01-matmul: a matmul that replaces NaN results by 0.

bad: an fp32 matmul whose epilogue "sanitises" the output with nan_to_num(nan=0),
as some stacks replace NaN by 0. Infinities and overflow are left alone; on rand
inputs nothing is NaN, so it passes allclose(1e-2).
"""
import numpy as np

DTYPE = "float32"


def _mm(a, b):
    with np.errstate(all="ignore"):
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)


def baseline(a, b):
    return np.zeros((a.shape[0], b.shape[1]), dtype=a.dtype)


def bad(a, b):
    return np.nan_to_num(_mm(a, b), nan=0.0, posinf=np.inf, neginf=-np.inf)


def good(a, b):
    return _mm(a, b)
