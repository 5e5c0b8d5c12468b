"""A bool input beside a float one: values kept where a mask is set (level 1 style)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        return torch.where(mask, x, torch.zeros_like(x)).sum(dim=1)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim), torch.rand(batch_size, dim) > 0.5]


def get_init_inputs():
    return []
