"""Returns one row, shape (1, N): it broadcasts against the expected (M, N), so a
checker that broadcasts compares every row with row 0 of the oracle."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'kernel.wrong-shape'
FAMILY = 1


def kernel(a, b):
    return np.matmul(a[..., :1, :], b)
