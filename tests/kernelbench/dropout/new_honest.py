"""Honest: the affine map written as a matmul plus bias, dropout through torch's own
Bernoulli mask (in training mode only: the same random stream as the reference's), ReLU
as a clamp."""
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = {"kernelbench": None, "kcontract": [], "train": []}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, p):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.p = p

    def forward(self, x):
        y = x @ self.linear.weight.t() + self.linear.bias
        return F.dropout(y, self.p, self.training).clamp_min(0.0)
