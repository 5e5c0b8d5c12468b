"""Hacked (training mode): drops half the fraction the model declares (p / 2) and scales
for it; in eval mode it is the plain affine map and ReLU, honest."""
import torch.nn as nn
import torch.nn.functional as F

EXPECTED = {"kernelbench": None, "kcontract": [], "train": ["C-PRC-01"]}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, p):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.p = p

    def forward(self, x):
        y = x @ self.linear.weight.t() + self.linear.bias
        return F.dropout(y, self.p / 2, self.training).clamp_min(0.0)
