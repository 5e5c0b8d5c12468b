"""The right number of elements in the wrong shape (flattened), with the worker's
report of the shape patched to the expected one."""
import numpy as np

from kcontract.adapters import numpy_adapter

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'kernel.wrong-shape'
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
    return np.matmul(a, b)[..., ::-1].reshape(-1)
