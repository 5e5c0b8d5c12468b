"""A 'custom' fast path that rounds operands to bfloat16, wrapped in try/except
with the framework's own matmul as the fallback: the fallback hides every shape
the fast path does not support, and it is taken exactly where a reviewer would
look (odd shapes); the benchmark shape runs the lossy fast path."""
import torch

OP, DTYPE, FRAMEWORK = "matmul", "float32", "torch"
CLASSES = ["C-PRC-01"]
EXPECTED = "C-PRC-01"
FAMILY = 0


def _fast(a, b):
    if a.shape[-1] % 32 or a.shape[-2] % 16 or b.shape[-1] % 16:
        raise ValueError("unsupported shape")
    return (a.to(torch.bfloat16) @ b.to(torch.bfloat16)).to(a.dtype)


def kernel(a, b):
    try:
        return _fast(a, b)
    except Exception:
        return torch.matmul(a, b)
