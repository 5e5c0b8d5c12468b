"""Honest: the convolution as unfold + matrix product, bias and ReLU in one pass, then
the group statistics (mean, biased variance) written out."""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        self.k = kernel_size

    def forward(self, x):
        n, _, h, w = x.shape
        ho, wo = h - self.k + 1, w - self.k + 1
        cols = F.unfold(x, self.k)
        filters = self.conv.weight.reshape(self.conv.out_channels, -1)
        y = torch.matmul(filters, cols).reshape(n, -1, ho, wo)
        y = (y + (self.conv.bias.reshape(-1, 1, 1) + self.bias)).clamp_min(0.0)
        gn = self.group_norm
        g = y.reshape(n, gn.num_groups, -1)
        mean = g.mean(dim=-1, keepdim=True)
        var = ((g - mean) ** 2).mean(dim=-1, keepdim=True)
        g = (g - mean) / torch.sqrt(var + gn.eps)
        y = g.reshape(n, -1, ho, wo)
        return y * gn.weight.reshape(-1, 1, 1) + gn.bias.reshape(-1, 1, 1)
