"""KernelBench level 2 style: convolution, a learned bias, ReLU and group norm fused in
one module (the bias shape is a tuple derived from a size constant)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        x = self.conv(x)
        x = x + self.bias
        x = torch.relu(x)
        return self.group_norm(x)


batch_size = 8
in_channels = 3
out_channels = 16
kernel_size = 3
num_groups = 4
image_size = (16, 16)
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.rand(batch_size, in_channels, *image_size)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups, bias_shape]
