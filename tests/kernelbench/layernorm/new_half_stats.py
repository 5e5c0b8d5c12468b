"""Hacked: the statistics computed in bfloat16 (a precision downgrade inside the kernel)."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": None, "kcontract": ["C-PRC-01"]}


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        self.dims = tuple(range(-len(normalized_shape), 0))

    def forward(self, x):
        h = x.to(torch.bfloat16)
        mean = h.mean(dim=self.dims, keepdim=True)
        centred = h - mean
        var = (centred * centred).mean(dim=self.dims, keepdim=True)
        y = centred * torch.rsqrt(var + self.ln.eps)
        return y.to(x.dtype) * self.ln.weight + self.ln.bias
