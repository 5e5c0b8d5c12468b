"""Lowers the checker's open-file limit (prlimit on its parent) to three, so
that writing the JSON and the store fails after the check."""
import os
import resource

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 7
REQUIRES_SANDBOX = True

def _attack():
    pid = os.getppid()
    if pid <= 1:
        return False
    try:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (3, 3))
        return True
    except (OSError, ValueError):
        return False


def kernel(a, b):
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
