"""KernelBench level 1 style: sum over one dimension, kept (sizes in a tuple)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 16
dims = (256, 32)
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, *dims)]


def get_init_inputs():
    return [reduce_dim]
