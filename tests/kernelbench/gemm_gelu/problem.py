"""KernelBench level 2 style: Gemm, GELU, scaling (smaller than the benchmark's)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.gemm(x)
        x = torch.nn.functional.gelu(x)
        return x * self.scaling_factor


batch_size = 32
in_features = 128
out_features = 64
scaling_factor = 2.0


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
