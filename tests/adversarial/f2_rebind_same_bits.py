"""Rebinds the worker's own comparison helper (_same_bits, in __main__) to always
say 'unchanged', then writes NaN into its second input."""
import sys

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'integrity.mutated-input'
FAMILY = 2


_main = sys.modules["__main__"]
if hasattr(_main, "_same_bits"):
    _main._same_bits = lambda x, y: True


def kernel(a, b):
    out = np.matmul(a, b)
    b[..., 0] = np.nan
    return out
