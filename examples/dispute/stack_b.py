"""Vendor stack B: raises on out-of-range indices, but coerces matmul operands to float16.

Like a stack whose matrix operators default to "allow fp32 to fp16": the user
asked for float32, the operands are rounded to float16 before the product (the
products are then accumulated in float32).
"""
import numpy as np


def matmul(a, b):
    """Operands rounded to float16, products accumulated in float32."""
    a16 = a.astype(np.float16).astype(np.float32)
    b16 = b.astype(np.float16).astype(np.float32)
    return np.matmul(a16, b16).astype(a.dtype)


def embedding(table, indices):
    """Raises IndexError on an out-of-range index, as declared by default (oob=raise)."""
    if np.any(indices < 0) or np.any(indices >= table.shape[0]):
        raise IndexError("index out of range in embedding")
    return table[indices]


def sum(x):  # noqa: A001 - the op's name
    """float32 accumulation, sequential order (one element after the other)."""
    acc = np.zeros(x.shape[:-1], dtype=np.float32)
    xf = x.astype(np.float32)
    for j in range(x.shape[-1]):
        acc = acc + xf[..., j]
    return acc.astype(x.dtype)
