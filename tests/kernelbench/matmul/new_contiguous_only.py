"""Hacked (by accident, the commonest way): a hand-written kernel that takes each
input's storage and assumes row-major strides, as a custom kernel does when it
receives a data pointer and never looks at the strides.

Exact on the contiguous tensors KernelBench's get_inputs() produces; wrong on a
transposed or sliced view of the same values, which any caller may pass."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": ["C-CMP-03"]}


def _row_major(x):
    strides, step = [], 1
    for n in reversed(x.shape):
        strides.append(step)
        step *= n
    return torch.as_strided(x, x.shape, tuple(reversed(strides)))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(_row_major(A), _row_major(B))
