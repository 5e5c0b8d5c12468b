"""Honest torch kernel: writes into torch.empty through out=, keeps a module-level
cache of nothing but workspace buffers (never results)."""
import torch

OP, DTYPE, FRAMEWORK = "matmul", "float32", "torch"
CLASSES = None  # the whole suite
EXPECTED = None
FAMILY = 0
_workspace = {}


def kernel(a, b):
    shape = a.shape[:-1] + b.shape[-1:]
    out = torch.empty(shape, dtype=torch.float32)
    _workspace[shape] = out  # reused workspace, rewritten on every call
    torch.matmul(a.float(), b.float(), out=out)
    return out.to(a.dtype).clone()
