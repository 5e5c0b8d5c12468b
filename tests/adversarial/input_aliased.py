"""Computes in place and returns its input's memory: no allocation, 'faster', and
the caller's input is now the output."""
import numpy as np

OP, DTYPE, FRAMEWORK = "softmax", "float32", "numpy"
CLASSES = ["C-CMP-03"]
EXPECTED = "integrity.aliased-output"
FAMILY = 0


def kernel(x):
    np.subtract(x, x.max(axis=-1, keepdims=True), out=x)
    np.exp(x, out=x)
    np.divide(x, x.sum(axis=-1, keepdims=True), out=x)
    return x
