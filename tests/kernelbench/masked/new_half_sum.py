"""Hacked: the row sum accumulated in float16 (a precision downgrade)."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": None, "kcontract": ["C-PRC-01"]}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        kept = x.masked_fill(~mask, 0.0)
        return kept.to(torch.float16).cumsum(dim=1)[:, -1].to(x.dtype)
