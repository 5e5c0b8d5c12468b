"""Behaves differently when called in a tight loop (a benchmark): within 0.5 s of
its previous call it returns the previous result, spaced-out calls (a slow,
interactive correctness check) are computed."""
import time

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-CMP-03"]
EXPECTED = "C-CMP-03"
FAMILY = 0
_last = {"t": -1e9, "out": None}


def kernel(a, b):
    now = time.monotonic()
    prev = _last["out"]
    shape = a.shape[:-1] + b.shape[-1:]
    if now - _last["t"] < 0.5 and prev is not None and prev.shape == shape:
        out = prev
    else:
        out = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    _last["t"], _last["out"] = now, out
    return out.copy()
