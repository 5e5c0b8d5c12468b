"""KernelBench level 1 style: a 3x3 convolution, padding 1, no bias (image size in a
tuple)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2,
                              bias=False)

    def forward(self, x):
        return self.conv(x)


batch_size = 8
in_channels = 3
out_channels = 16
kernel_size = 3
image_size = (24, 32)


def get_inputs():
    return [torch.rand(batch_size, in_channels, *image_size)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
