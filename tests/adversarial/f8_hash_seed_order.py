"""Sums in an order chosen by Python's string hash (randomised per process by
PYTHONHASHSEED): deterministic within one process, different in the next."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-ORD-02"]
EXPECTED = 'C-ORD-02'
FAMILY = 8


_order = np.random.default_rng(hash("kcontract") & 0xFFFFFFFF).permutation(1 << 16)


def kernel(a, b):
    k = a.shape[-1]
    order = _order[_order < k]  # a summation order fixed by this process's hash seed
    out = np.zeros(a.shape[:-1] + b.shape[-1:], dtype=np.float32)
    for j in order:
        out += a[..., :, j:j + 1] * b[..., j:j + 1, :]
    return out.astype(a.dtype)
