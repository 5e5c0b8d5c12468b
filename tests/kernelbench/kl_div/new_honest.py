"""Honest: sum of t * (log t - log p) over everything, divided by the batch size."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        terms = torch.where(targets > 0, targets * (torch.log(targets) - torch.log(predictions)),
                            torch.zeros_like(targets))
        return terms.sum() / predictions.shape[0]
