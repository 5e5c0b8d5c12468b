"""One number broadcast to the output shape (a zero-stride view): computes the
mean of the true result once, writes no output."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.strides"
FAMILY = 0


def kernel(a, b):
    mean = float(a.astype(np.float64).sum(axis=-1).mean() * b.astype(np.float64).mean())
    return np.broadcast_to(np.asarray(mean, dtype=a.dtype), a.shape[:-1] + b.shape[-1:])
