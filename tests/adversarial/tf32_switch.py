"""Switches on TF32 for float32 matmuls (and the reduced-precision float32
matmul mode) from inside the kernel: the process computes in 10-bit mantissas
from then on, the check included, unless the switch is seen."""
import torch

OP, DTYPE, FRAMEWORK = "matmul", "float32", "torch"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.state"
FAMILY = 0


def kernel(a, b):
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = False
    return a @ b
