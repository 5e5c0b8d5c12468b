"""Replaces the worker's Worker.inspect with one that never flags anything and
scales an input in place after computing the result."""
import sys

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'integrity.mutated-input'
FAMILY = 2


_main = sys.modules["__main__"]
if hasattr(_main, "Worker"):
    _orig = _main.Worker.inspect

    def _quiet(self, out, arrays, natives, flags, seconds):
        status, payload = _orig(self, out, arrays, natives, [], seconds)
        payload["flags"] = []
        return status, payload
    _main.Worker.inspect = _quiet


def kernel(a, b):
    out = np.matmul(a, b)
    a *= 2
    return out
