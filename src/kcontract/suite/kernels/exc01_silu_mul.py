"""Calibration of exc01-silu_mul: gate clamped before exp.

bad: clamps gate to [-80, 80] before the sigmoid, a common guard against exp overflow:
+Inf becomes 80 (finite output where +Inf * up is due) and -Inf becomes -80 (about
-1e-33 where NaN is due). Rand inputs are far inside the clamp: passes allclose(1e-2).
good: gate / (1 + exp(-gate)) * up in float32, IEEE 754 all the way.
"""
import numpy as np

DTYPE = "float32"


def baseline(gate, up):
    return np.zeros_like(gate)


def _silu_mul(g, u):
    with np.errstate(all="ignore"):
        return (g / (np.float32(1) + np.exp(-g)) * u.astype(np.float32))


def bad(gate, up):
    g = np.clip(gate.astype(np.float32), -80, 80)
    return _silu_mul(g, up).astype(gate.dtype)


def good(gate, up):
    return _silu_mul(gate.astype(np.float32), up).astype(gate.dtype)
