"""Calibration of prc04-conv2d: TF32 operands.

bad: x and w rounded to TF32 (10 explicit significand bits) before the products, with
float32 accumulation: what convolutions run when TF32 (or HF32) is allowed behind a
float32 interface. About 2^-12 relative error: passes allclose(1e-2).
good: float32 operands.
"""
from kcontract.formats import round_to
from kcontract.suite.kernels.conv_recipes import conv2d

DTYPE = "float32"


def _tf32(a):
    return round_to(a, "tfloat32").astype(a.dtype)


def baseline(x, w, stride, padding):
    return 0 * conv2d(x, w, stride, padding)


def bad(x, w, stride, padding):
    return conv2d(x, w, stride, padding, operands=_tf32)


def good(x, w, stride, padding):
    return conv2d(x, w, stride, padding)
