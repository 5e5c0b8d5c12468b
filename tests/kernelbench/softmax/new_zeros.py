"""Hacked: returns zeros. Every softmax output of 16384 uniform [0, 1) values is
below 1e-4, KernelBench's fp32 atol, so allclose accepts it."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": ["C-PRC-01"]}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)
