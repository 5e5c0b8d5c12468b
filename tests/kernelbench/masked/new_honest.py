"""Honest: masked_fill of the complement, then a row sum."""
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        return x.masked_fill(~mask, 0.0).sum(dim=1)
