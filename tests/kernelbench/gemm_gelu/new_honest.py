"""Honest: addmm and the erf GELU written out, one fused-looking expression."""
import math

import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        return 0.5 * y * (1.0 + torch.erf(y / math.sqrt(2.0))) * self.scaling_factor
