"""Calibration of cmp03-silu_mul: a grid of whole blocks only.

bad: processes the flattened inputs in blocks of 256 elements and launches
R*N // 256 blocks: the last R*N % 256 outputs are never written (left zero). Exact at
the benchmark shape (16 x 1024); wrong whenever R*N % 256 != 0.
good: every element, float32.
"""
import numpy as np

DTYPE = "float32"
BLOCK = 256


def baseline(gate, up):
    return np.zeros_like(gate)


def _silu_mul(g, u):
    g = g.astype(np.float32)
    with np.errstate(over="ignore"):
        return g / (np.float32(1) + np.exp(-g)) * u.astype(np.float32)


def bad(gate, up):
    out = np.zeros(gate.size, dtype=np.float32)
    n = gate.size // BLOCK * BLOCK
    out[:n] = _silu_mul(gate.reshape(-1)[:n], up.reshape(-1)[:n])
    return out.reshape(gate.shape).astype(gate.dtype)


def good(gate, up):
    return _silu_mul(gate, up).astype(gate.dtype)
