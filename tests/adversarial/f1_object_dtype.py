"""The right values as Python floats in an object array: it pickles as plain data
and compares equal elementwise, but it is not the declared dtype."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'kernel.wrong-dtype'
FAMILY = 1


def kernel(a, b):
    return np.matmul(a, b).astype(object)
