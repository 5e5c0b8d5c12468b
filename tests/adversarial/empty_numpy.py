"""numpy.empty and no work: whatever the allocator's recycled block held (often
an earlier result of the same size). The worker's allocator junk-fills blocks."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "C-PRC-01"
FAMILY = 0


def kernel(a, b):
    return np.empty(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
