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
