"""Switches flush-to-zero on when it is imported (fast subnormal-free arithmetic,
process-wide, every thread, float64 included), then computes correctly."""
import numpy as np
import torch

torch.set_flush_denormal(True)

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.state"
FAMILY = 0


def kernel(a, b):
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
