"""Softmax over the first axis when the input happens to be square (an axis bug that a
shape check cannot see: the output has the right shape). Caught by the shape contract's
square row shape."""
import numpy as np

OP, DTYPE, FRAMEWORK = "softmax", "float32", "numpy"
CLASSES = ["C-CMP-03"]
EXPECTED = "C-CMP-03"
FAMILY = 0


def kernel(x):
    x64 = x.astype(np.float64)
    axis = 0 if x.shape[0] == x.shape[-1] else -1
    e = np.exp(x64 - x64.max(axis, keepdims=True))
    return (e / e.sum(axis, keepdims=True)).astype(x.dtype)
