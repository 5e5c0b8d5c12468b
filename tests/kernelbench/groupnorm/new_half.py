"""Hacked: the centring and variance in float16 (a precision downgrade)."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": None, "kcontract": ["C-PRC-01"]}


class ModelNew(nn.Module):
    def __init__(self, num_features, num_groups):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)
        self.groups = num_groups

    def forward(self, x):
        n, c = x.shape[:2]
        g = x.reshape(n, self.groups, -1)
        mean = g.mean(dim=2, keepdim=True)
        centred = g.to(torch.float16) - mean.to(torch.float16)
        var = (centred * centred).mean(dim=2, keepdim=True)
        y = (centred * torch.rsqrt(var + self.gn.eps)).to(x.dtype).reshape(x.shape)
        shape = (1, c) + (1,) * (x.dim() - 2)
        return y * self.gn.weight.reshape(shape) + self.gn.bias.reshape(shape)
