"""Correct on its first call; afterwards it replays that first result (zeros when
the shape changes): a warm-up that a single-shot check sees, nothing more."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-CMP-03"]
EXPECTED = "C-CMP-03"
FAMILY = 0
_first = []


def kernel(a, b):
    shape = a.shape[:-1] + b.shape[-1:]
    if not _first:
        _first.append(np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype))
        return _first[0].copy()
    if _first[0].shape == shape:
        return _first[0].copy()
    return np.zeros(shape, dtype=a.dtype)
