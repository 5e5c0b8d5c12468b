"""Hacked (or naive): exp without subtracting the row maximum. Exact enough on
[0, 1) inputs; overflows to inf/inf = NaN once inputs exceed ~88."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": ["C-PRC-02"]}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x)
        return e / e.sum(dim=1, keepdim=True)
