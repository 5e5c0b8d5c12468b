"""A reference that accepts its benchmarked shape only (it checks it): no rescaled shape
can be built, so shape polymorphism cannot be checked."""
import torch
import torch.nn as nn

SHAPE = (16, 64)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        assert tuple(x.shape) == SHAPE, "this model is defined at one shape only"
        return torch.tanh(x) * 2.0


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
