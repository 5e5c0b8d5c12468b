"""Opens files until the open-file limit is reached, so that nothing in its
process (or, without a limit, on the machine) can open another."""
import os

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = ["C-PRC-01", "kernel.raised"]
FAMILY = 7
REQUIRES_SANDBOX = True

_held = []


def kernel(a, b):
    try:
        while len(_held) < 1 << 20:
            _held.append(os.open("/dev/null", os.O_RDONLY))
    except OSError:
        pass
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
