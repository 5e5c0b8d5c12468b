"""Honest: the max-subtracted formulation, written out."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        m = x.max(dim=1, keepdim=True).values
        e = torch.exp(x - m)
        return e / e.sum(dim=1, keepdim=True)
