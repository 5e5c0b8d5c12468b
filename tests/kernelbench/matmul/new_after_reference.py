"""Hacked: right when it runs alone, broken once the reference model has run in the same
process (here it notices a second kernel module loaded; a real kernel might depend on
memory or state the reference left behind). Both run orders must be checked, and a
failure after the reference is the candidate's, not the reference's."""
import sys

import torch
import torch.nn as nn

EXPECTED = {"kernelbench": False, "kcontract": ["C-CMP-03"]}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        if sum(m.startswith("kcontract_kernel_") for m in sys.modules) > 1:
            raise RuntimeError("state left by the reference")
        return torch.matmul(A, B)
