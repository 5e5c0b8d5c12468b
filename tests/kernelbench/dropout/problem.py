"""KernelBench level 2 style: Gemm, Dropout, ReLU (smaller than the benchmark's)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, p):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return torch.relu(self.dropout(self.linear(x)))


batch_size = 16
in_features = 48
out_features = 32
dropout_p = 0.2


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, dropout_p]
