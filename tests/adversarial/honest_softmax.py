"""Honest softmax: max-subtracted, in float32, with a scratch copy of the input
(the input itself is never written)."""
import numpy as np

OP, DTYPE, FRAMEWORK = "softmax", "float32", "numpy"
CLASSES = None  # the whole suite
EXPECTED = None
FAMILY = 0


def kernel(x):
    s = x.astype(np.float32, copy=True)
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s.astype(x.dtype)
