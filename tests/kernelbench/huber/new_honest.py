"""Honest: quadratic inside |d| < 1, linear outside, mean over all elements."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        d = predictions - targets
        a = d.abs()
        return torch.where(a < 1.0, 0.5 * d * d, a - 0.5).sum() / d.numel()
