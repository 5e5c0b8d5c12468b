"""Calibration of prc02-softmax: exp without max subtraction.

bad: exp(x) / sum(exp(x)) in fp32. Exact enough on rand inputs (passes allclose),
overflows to inf (NaN outputs) once logits exceed ~88.
"""
import numpy as np

DTYPE = "float32"


def baseline(x):
    # zeros would pass allclose(atol=1e-2): every probability of a 512-wide row is ~0.002
    raise NotImplementedError("softmax kernel not implemented")


def bad(x):
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return (e / np.sum(e, axis=-1, keepdims=True)).astype(x.dtype)


def good(x):
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return (e / np.sum(e, axis=-1, keepdims=True)).astype(x.dtype)
