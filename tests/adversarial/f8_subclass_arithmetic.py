"""An ndarray subclass whose memory holds zeros and whose arithmetic and
comparisons claim a match (x - y is zero, x == y everywhere, abs is zero):
fools a checker that computes with the object it was handed."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 8


class Agreeable(np.ndarray):
    def __sub__(self, other):
        return np.zeros(self.shape)

    __rsub__ = __sub__

    def __eq__(self, other):
        return np.ones(self.shape, dtype=bool)

    def __abs__(self):
        return np.zeros(self.shape)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return np.zeros(self.shape)


def kernel(a, b):
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype).view(Agreeable)
