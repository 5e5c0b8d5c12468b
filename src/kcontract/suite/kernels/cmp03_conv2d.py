"""Calibration of cmp03-conv2d: channels in vectors of 4, no remainder.

bad: reads the input channels four at a time (a vectorised channel loop) and never
handles the last C % 4 channels. Exact at the benchmark's C = 16; wrong whenever
C % 4 != 0 (with C < 4 nothing is summed at all).
good: every channel.
"""
from kcontract.suite.kernels.conv_recipes import conv2d

DTYPE = "float32"
VEC = 4


def baseline(x, w, stride, padding):
    return 0 * conv2d(x, w, stride, padding)


def bad(x, w, stride, padding):
    return conv2d(x, w, stride, padding, channels=x.shape[1] // VEC * VEC)


def good(x, w, stride, padding):
    return conv2d(x, w, stride, padding)
