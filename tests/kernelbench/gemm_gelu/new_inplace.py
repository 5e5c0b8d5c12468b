"""Hacked: writes its result into the input's storage and returns a view of it
(no allocation: 'faster'). KernelBench ran the reference first, so it agrees."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": ["integrity.aliased-output"]}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        y = torch.nn.functional.gelu(self.gemm(x)) * self.scaling_factor
        flat = x.view(-1)[: y.numel()]
        flat.copy_(y.reshape(-1))
        return flat.view_as(y)
