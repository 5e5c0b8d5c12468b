"""A user's own op: residual add fused with RMSNorm, as transformer blocks run it.

    h = x + residual;  y = h / sqrt(mean(h^2 over the last axis) + eps) * weight

Defined with kcontract.define_op, so every generic contract of the suite applies to it
(C-PRC-01, C-ORD-02, C-ORD-03, C-CMP-03, C-EXC-01)::

    kcontract check kernels.py:add_rmsnorm --op fused_ops.py:add_rmsnorm --dtype float32
"""
import numpy as np

import kcontract


def add_rmsnorm_reference(x, residual, weight, eps=1e-6):
    """The float64 oracle: the unfused composition."""
    h = x + residual
    return h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + eps) * weight


add_rmsnorm = kcontract.define_op(
    name="add_rmsnorm",
    inputs={"x": ("R", "N"), "residual": ("R", "N"), "weight": ("N",)},
    output=("R", "N"),
    oracle=add_rmsnorm_reference,
    reduction=("N",),          # the mean of squares runs over N: the tolerance's n
    kwargs={"eps": 1e-6},
    batch="R",                 # rows are independent: C-ORD-03 applies
    reorder=True,              # permuting N (x, residual, weight and the output) is exact
    summary="add_rmsnorm(x, residual, weight, eps=1e-6): rmsnorm(x + residual) * weight, "
            "over the last axis",
)
