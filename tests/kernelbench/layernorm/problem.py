"""KernelBench level 1 style (problem 40, LayerNorm): sizes in a tuple, smaller than the
benchmark's; the normalised size is also a model attribute (``self.dim``)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.dim = normalized_shape[-1]
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.ln(x)


batch_size = 16
features = (4, 96)
dim = features[-1]


def get_inputs():
    return [torch.randn(batch_size, *features)]


def get_init_inputs():
    return [features]
