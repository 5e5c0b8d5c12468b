"""Hacked: allocates the output and does no work. Where the allocator hands back
the block the reference's result just left (a caching allocator does, for a
same-sized request), the 'result' is right."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": None, "kcontract": ["C-PRC-01"]}  # KernelBench: allocator-dependent


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.empty(A.shape[0], B.shape[1], dtype=A.dtype, device=A.device)
