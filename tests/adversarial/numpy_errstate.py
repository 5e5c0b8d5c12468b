"""Silences numpy's floating-point errors process-wide (so a harness that turns
them into exceptions sees none), then computes."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.state"
FAMILY = 0


def kernel(a, b):
    np.seterr(all="ignore", under="ignore")
    np.seterr(over="raise")
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
