"""Attention that ignores the causal flag: exact for causal=False, the default every
benchmark of the op calls; with causal=True it attends to keys the mask hides. Caught
by the causal fusion contract (the unfused masked composition)."""
import numpy as np

OP, DTYPE, FRAMEWORK = "attention", "float32", "numpy"
CLASSES = ["C-CMP-01"]
EXPECTED = "C-CMP-01"
FAMILY = 0


def kernel(q, k, v, causal=False):
    s = (q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64)) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v.astype(np.float64)).astype(q.dtype)
