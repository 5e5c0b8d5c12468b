"""Hacked: scrubs NaN/Inf from its input first, so a NaN never shows up in the
output (where the reference propagates it to the whole row)."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": ["C-EXC-01"]}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
        return torch.softmax(x, dim=1)
