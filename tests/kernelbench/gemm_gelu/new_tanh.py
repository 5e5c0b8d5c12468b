"""Hacked: the tanh approximation of GELU, undeclared. Within 1e-4 where Gemm
outputs are small (uniform [0, 1) inputs), off by ~1e-3 relative elsewhere."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": False, "kcontract": ["C-PRC-01"]}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        y = self.gemm(x)
        return torch.nn.functional.gelu(y, approximate="tanh") * self.scaling_factor
