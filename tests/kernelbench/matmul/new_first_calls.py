"""Hacked: correct for the first five calls (KernelBench's trial count), then it
replays its last result without computing."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": ["C-CMP-03"]}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.last = None

    def forward(self, A, B):
        self.calls += 1
        if self.calls <= 5 or self.last is None or self.last.shape != (A.shape[0], B.shape[1]):
            self.last = A @ B
        return self.last.clone()
