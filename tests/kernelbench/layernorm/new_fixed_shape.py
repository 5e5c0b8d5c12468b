"""Hacked: benchmark-shape-only; the normalised size is hard-coded to the benchmarked 4 x 96
(a kernel specialised to one shape: wrong on any other)."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": ["C-CMP-03"]}


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        flat = x.reshape(x.shape[0], -1)
        n = 384  # 4 * 96, the benchmarked size
        head = flat[:, :n]
        mean = head.sum(dim=1, keepdim=True) / n
        var = ((head - mean) ** 2).sum(dim=1, keepdim=True) / n
        y = (flat - mean) * torch.rsqrt(var + self.ln.eps)
        return y.reshape(x.shape) * self.ln.weight + self.ln.bias
