"""The right values in a non-native byte order (>f4): a checker that compares
dtypes by name ('float32') accepts it, and whoever reads the buffer natively gets
garbage."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'kernel.wrong-dtype'
FAMILY = 1


def kernel(a, b):
    return np.matmul(a, b).astype(">f4")
