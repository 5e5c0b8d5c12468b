"""Honest: the products summed elementwise, the bias added, the scale and the residual
folded into one factor (1 + s)."""
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        w, b = self.matmul.weight, self.matmul.bias
        y = (x.unsqueeze(1) * w.unsqueeze(0)).sum(dim=-1) + b
        return y * (1.0 + self.scaling_factor)
