"""Scrubs NaN and Inf from its inputs (nan_to_num) before a correct matmul: the
output is finite where IEEE propagation puts NaN."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-EXC-01"]
EXPECTED = "C-EXC-01"
FAMILY = 0


def kernel(a, b):
    a = np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
    b = np.nan_to_num(b, nan=0.0, posinf=0.0, neginf=0.0)
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
