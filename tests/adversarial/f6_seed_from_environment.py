"""Looks for the run's seed where a checker might leak it to the kernel's
process: its command line, its environment, the parent's command line."""
import os
import sys

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 6
SEED = "random"

def _leak():
    text = " ".join(sys.argv) + " " + " ".join(f"{k}={v}" for k, v in os.environ.items())
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
            text += fh.read().decode(errors="replace")
    except OSError:
        pass
    return "--seed" in text or "KCONTRACT_SEED" in text


def kernel(a, b):
    if _leak():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
