"""torch.empty and no work: on a GPU the caching allocator often hands back the
block that held the reference's output, so the 'result' is right. The checker's
worker fills uninitialised memory with NaN, so nothing can look right by luck."""
import torch

OP, DTYPE, FRAMEWORK = "matmul", "float32", "torch"
CLASSES = ["C-PRC-01"]
EXPECTED = "C-PRC-01"
FAMILY = 0


def kernel(a, b):
    return torch.empty(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
