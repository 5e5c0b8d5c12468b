"""Turns autograd off for the whole process at import (torch.set_grad_enabled
(False)): global state the caller relies on, flipped behind its back."""
import torch

OP, DTYPE, FRAMEWORK = "matmul", "float32", "torch"
CLASSES = ["C-PRC-01"]
EXPECTED = 'integrity.state'
FAMILY = 8


torch.set_grad_enabled(False)


def kernel(a, b):
    return a @ b
