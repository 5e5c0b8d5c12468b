"""Hacked (training mode): ignores dropout altogether (a kernel that fused the layer away);
in eval mode that is exactly right."""
import torch.nn as nn

EXPECTED = {"kernelbench": None, "kcontract": [], "train": ["C-PRC-01"]}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, p):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.p = p

    def forward(self, x):
        return (x @ self.linear.weight.t() + self.linear.bias).clamp_min(0.0)
