"""Honest: computes the transposed product and returns its transpose, a
non-contiguous (but non-overlapping) output; warns through the warnings module
(which reads stack frames on the kernel's behalf)."""
import warnings

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01", "C-CMP-03", "C-ORD-02", "C-EXC-01"]
EXPECTED = None
FAMILY = 0


def kernel(a, b):
    warnings.warn("kernel is experimental", RuntimeWarning, stacklevel=2)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    out_t = np.matmul(np.swapaxes(b32, -1, -2), np.swapaxes(a32, -1, -2)).astype(a.dtype)
    return np.swapaxes(out_t, -1, -2)
