"""A matmul under silent precision coercion, and the honest one.

The user writes an fp32 matmul and believes fp32 runs.  The stack underneath has
other plans: Ascend training stacks default matrix operators to
``allow_fp32_to_fp16`` -- operands are cast to fp16, the matrix unit multiplies
them and accumulates in fp32, the result comes back as fp32.  The dtype of every
tensor the user can see is float32, and the error (about 2^-11 relative per
operand) passes a benchmark's allclose(1e-2) with room to spare.

``matmul_coerced_fp16`` emulates that path in numpy; ``matmul_fp32`` is what the
user believes runs.
"""
import numpy as np


def matmul_coerced_fp16(a, b):
    """fp32 in, fp32 out; operands silently rounded to fp16, fp32 accumulation."""
    with np.errstate(over="ignore", invalid="ignore"):
        a16 = a.astype(np.float16)  # the coercion: round to nearest fp16 (inf beyond 65504)
        b16 = b.astype(np.float16)
    # the matrix unit: fp16 x fp16 products are exact in fp32, accumulated in fp32
    return np.matmul(a16.astype(np.float32), b16.astype(np.float32))


def matmul_fp32(a, b):
    """The honest fp32 matmul."""
    return np.matmul(a, b)
