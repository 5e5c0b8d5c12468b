"""KernelBench level 1 style: KL divergence of two distributions over the last axis,
``batchmean`` reduction."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return torch.nn.functional.kl_div(torch.log(predictions), targets, reduction="batchmean")


batch_size = 32
input_shape = (128,)


def get_inputs():
    return [torch.randn(batch_size, *input_shape).softmax(dim=-1),
            torch.randn(batch_size, *input_shape).softmax(dim=-1)]


def get_init_inputs():
    return []
