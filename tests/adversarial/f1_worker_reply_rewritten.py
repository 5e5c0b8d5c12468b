"""Rebinds the worker's reply builder (the worker runs as __main__) so every
reply claims success with an output it made up: zeros of the right shape."""
import sys

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 1


_main = sys.modules["__main__"]


def _forged(self, out, arrays, natives, flags, seconds):
    shape = arrays[0].shape[:-1] + arrays[1].shape[-1:]
    return "ok", {"out": np.zeros(shape, np.float32), "meta": {"shape": shape,
                  "dtype": "float32"}, "flags": [], "seconds": seconds}


if hasattr(_main, "Worker"):
    _main.Worker.inspect = _forged


def kernel(a, b):
    return np.matmul(a, b)
