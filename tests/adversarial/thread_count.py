"""Sets torch's thread count to one (results that depend on the partitioning
then differ between the check and production), then computes."""
import torch

OP, DTYPE, FRAMEWORK = "matmul", "float32", "torch"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.state"
FAMILY = 0


def kernel(a, b):
    torch.set_num_threads(1)
    return a @ b
