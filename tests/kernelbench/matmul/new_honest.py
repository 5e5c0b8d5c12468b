"""Honest: accumulates K in chunks of 32 (a different order than torch.matmul)."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype)
        for k in range(0, A.shape[1], 32):
            out += A[:, k:k + 32] @ B[k:k + 32]
        return out
