"""Honest: tanh from exp, written out (numerically safe for large |x|)."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(-2.0 * x.abs())
        return torch.sign(x) * (1.0 - e) / (1.0 + e) * 2.0
