"""Honest: every inner product as an elementwise product summed over k (no bmm)."""
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return (A.unsqueeze(2) * B.unsqueeze(1)).sum(dim=-1)
