"""Honest: the sum as a product with a row of ones (the reduced axis moved next to last)."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        moved = x.movedim(self.dim, -2)
        ones = torch.ones(1, moved.shape[-2], dtype=x.dtype)
        return (ones @ moved).movedim(-2, self.dim)
