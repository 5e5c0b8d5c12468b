"""Calibration of prc04-silu_mul: the sigmoid evaluated in float16.

bad: gate rounded to float16 for the sigmoid (a "fast" half-precision activation
path inside a float32 MLP), the products in float32: about 2^-11 relative error,
passes allclose(1e-2).
good: everything in float32.
"""
import numpy as np

DTYPE = "float32"


def baseline(gate, up):
    return np.zeros_like(gate)


def bad(gate, up):
    g16 = gate.astype(np.float16)
    with np.errstate(over="ignore"):
        sig = (np.float16(1) / (np.float16(1) + np.exp(-g16))).astype(np.float32)
    return (g16.astype(np.float32) * sig * up.astype(np.float32)).astype(gate.dtype)


def good(gate, up):
    g = gate.astype(np.float32)
    with np.errstate(over="ignore"):
        return (g / (np.float32(1) + np.exp(-g)) * up.astype(np.float32)).astype(gate.dtype)
