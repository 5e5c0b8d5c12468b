"""A structured array whose single field holds zeros: the right shape, a dtype
whose name is not a float format but whose itemsize matches."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'kernel.wrong-dtype'
FAMILY = 1


def kernel(a, b):
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=[("v", "<f4")])
