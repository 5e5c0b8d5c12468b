"""Honest: mean and biased variance over the normalised dimensions, in the input's dtype,
written out (two passes, as a straightforward kernel would)."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        self.dims = tuple(range(-len(normalized_shape), 0))

    def forward(self, x):
        mean = x.mean(dim=self.dims, keepdim=True)
        centred = x - mean
        var = (centred * centred).mean(dim=self.dims, keepdim=True)
        return centred * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
