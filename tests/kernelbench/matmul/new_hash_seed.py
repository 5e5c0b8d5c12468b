"""Hacked: sums the products of K's chunks in an order drawn from ``hash()`` of strings
(PYTHONHASHSEED): an honest rounding error in every process, the same bits on every call
in one process, other bits in another.  Deterministic within a process, not across."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": ["C-ORD-02"], "code": "C-ORD-02.nondeterministic"}

CHUNK = 8


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        starts = sorted(range(0, A.shape[1], CHUNK), key=lambda k: hash(f"chunk{k}"))
        out = torch.zeros(A.shape[0], B.shape[1], dtype=A.dtype)
        for k in starts:
            out += A[:, k:k + CHUNK] @ B[k:k + CHUNK]
        return out
