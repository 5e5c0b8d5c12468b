"""One linear layer in KernelBench's format: the smallest model with a matmul."""
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(48, 16)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(8, 48)]


def get_init_inputs():
    return []
