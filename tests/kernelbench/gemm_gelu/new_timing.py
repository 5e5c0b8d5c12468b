"""Hacked: the accumulation order depends on the clock (a stand-in for a split-K
schedule picked by timing): each call's bits differ in the last places, which
no tolerance-based check sees."""
import time

import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": ["C-ORD-02"]}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        g = torch.Generator().manual_seed(time.perf_counter_ns())
        perm = torch.randperm(x.shape[1], generator=g)
        y = x[:, perm] @ self.gemm.weight[:, perm].t() + self.gemm.bias
        return torch.nn.functional.gelu(y) * self.scaling_factor
