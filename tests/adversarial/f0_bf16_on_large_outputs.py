"""bfloat16 operands only for products with at least 128 x 128 outputs, as a library
sends large products to its matrix units: the small shapes a naive test and most
contracts use stay exact. Caught by C-PRC-04's large product."""
import ml_dtypes
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-04"]
EXPECTED = "C-PRC-04"
FAMILY = 0


def kernel(a, b):
    if a.shape[-2] * b.shape[-1] >= 128 * 128:
        bf = ml_dtypes.bfloat16
        return (a.astype(bf).astype(np.float32) @ b.astype(bf).astype(np.float32)).astype(a.dtype)
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)
