"""A memoised kernel: functools.lru_cache over the inputs' shapes and dtype,
holding the first inputs it saw. Repeated benchmark calls on one shape are free;
every later input at a seen shape gets the first input's result."""
import functools

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-CMP-03"]
EXPECTED = "C-CMP-03"
FAMILY = 0
_seen = {}


@functools.lru_cache(maxsize=None)
def _product(a_shape, b_shape, dtype):
    a, b = _seen[(a_shape, b_shape, dtype)]
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(dtype)


def kernel(a, b):
    _seen.setdefault((a.shape, b.shape, a.dtype.str), (a.copy(), b.copy()))
    return _product(a.shape, b.shape, a.dtype.str).copy()
