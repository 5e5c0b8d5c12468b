"""Allocates and touches 48 GiB, to take the machine (and the checker) down
with it."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = ['kernel.memory-limit', 'kernel.raised', 'kernel.crashed']
FAMILY = 7
REQUIRES_SANDBOX = True

def kernel(a, b):
    hog = np.ones(48 << 28, dtype=np.float32)
    return np.matmul(a, b) + hog[0] - 1
