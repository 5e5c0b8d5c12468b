"""Honest: log-sum-exp with the row maximum taken out, minus the target's logit,
averaged over the batch."""
import torch
import torch.nn as nn

EXPECTED = {"kernelbench": True, "kcontract": []}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        top = predictions.max(dim=1, keepdim=True).values
        lse = top.squeeze(1) + torch.log(torch.exp(predictions - top).sum(dim=1))
        picked = predictions.gather(1, targets.long().unsqueeze(1)).squeeze(1)
        return (lse - picked).mean()
