"""Zeroes its inputs after computing: in a harness that runs the reference after
the candidate on the same tensors, the reference then sees zeros and agrees with
anything small."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.mutated-input"
FAMILY = 0


def kernel(a, b):
    out = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    a[...] = 0
    b[...] = 0
    return out
