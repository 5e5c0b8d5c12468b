"""Returns an output with a zero-length leading axis and patches the worker's
numpy adapter so that the reply reports the right shape: a checker that believes
the reported shape and broadcasts compares zero elements and passes."""
import numpy as np

from kcontract.adapters import numpy_adapter

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = ["kernel.wrong-shape", "integrity.strides"]
FAMILY = 1


_real = numpy_adapter.NumpyAdapter.to_numpy
_want = {}


def _lying(self, value):
    arr, meta = _real(self, value)
    meta["shape"] = _want.get("shape", meta["shape"])
    return arr, meta


numpy_adapter.NumpyAdapter.to_numpy = _lying


def kernel(a, b):
    _want["shape"] = a.shape[:-1] + b.shape[-1:]
    return np.zeros((0,) + b.shape[-1:], dtype=a.dtype)
