"""Stops its own process group (kill(0, SIGSTOP)): the worker freezes
mid-call, and a checker without a deadline waits with it."""
import os
import signal

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'kernel.timeout'
FAMILY = 7
TIMEOUT = 3

def kernel(a, b):
    os.kill(0, signal.SIGSTOP)
    return np.matmul(a, b)
