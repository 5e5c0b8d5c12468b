"""Honest: im2col (unfold) and one matrix product with the flattened filters."""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2,
                              bias=False)
        self.k = kernel_size

    def forward(self, x):
        n, _, h, w = x.shape
        cols = F.unfold(x, self.k, padding=self.k // 2)           # (n, c*k*k, h*w)
        filters = self.conv.weight.reshape(self.conv.out_channels, -1)
        return torch.matmul(filters, cols).reshape(n, -1, h, w)
