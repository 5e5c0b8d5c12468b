"""KernelBench level 1 style: batched matrix multiplication with the second operand
transposed, C[b] = A[b] @ B[b]^T."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.bmm(A, B.transpose(1, 2))


batch_size = 8
m = 48
k = 64
n = 32


def get_inputs():
    return [torch.rand(batch_size, m, k), torch.rand(batch_size, n, k)]


def get_init_inputs():
    return []
