"""Honest: K accumulated in blocks of 32 into a buffer from numpy.empty that is
fully written before it is read (uninitialised memory, used correctly)."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = None  # the whole suite
EXPECTED = None
FAMILY = 0


def kernel(a, b):
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    out = np.empty(a.shape[:-1] + b.shape[-1:], dtype=np.float32)
    out[...] = 0.0
    for k in range(0, a.shape[-1], 32):
        out += np.matmul(a32[..., k:k + 32], b32[..., k:k + 32, :])
    return out.astype(a.dtype)
