"""Honest: the affine map written as a matmul plus bias, dropout as a scaled Bernoulli mask
drawn only in training mode, ReLU as a clamp."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": None, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, p):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.p = p

    def forward(self, x):
        y = x @ self.linear.weight.t() + self.linear.bias
        if self.training and self.p > 0:
            keep = (torch.rand_like(y) >= self.p).to(y.dtype)
            y = y * keep / (1.0 - self.p)
        return y.clamp_min(0.0)
