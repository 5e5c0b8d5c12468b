"""Hacked: drops activations even in eval mode (a mask applied unconditionally)."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": False, "kcontract": ["C-PRC-01"]}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, p):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.p = p

    def forward(self, x):
        y = x @ self.linear.weight.t() + self.linear.bias
        keep = (torch.rand_like(y) >= self.p).to(y.dtype)
        return (y * keep / (1.0 - self.p)).clamp_min(0.0)
