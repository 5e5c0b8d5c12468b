"""Calibration of prc04-cast: float32 -> bfloat16 by truncation.

bad: keep the top 16 bits of the float32 pattern (round toward zero), the classic
fast conversion. Error below one bf16 ulp (< 0.8 % relative): passes allclose(1e-2),
differs from round-to-nearest-even on about half of all inputs.
"""
import ml_dtypes
import numpy as np

DTYPE = "bfloat16"


def _target(dtype):
    return np.dtype(ml_dtypes.bfloat16) if str(dtype) == "bfloat16" else np.dtype(dtype)


def baseline(x, dtype="bfloat16"):
    return np.zeros(x.shape, dtype=_target(dtype))


def bad(x, dtype="bfloat16"):
    t = _target(dtype)
    x = np.ascontiguousarray(x, dtype=np.float32)
    if t.name == "bfloat16":
        top = (x.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        return top.view(ml_dtypes.bfloat16)
    # other targets: round to nearest, then step back toward zero where that rounded up
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(t)
        up = np.abs(y.astype(np.float64)) > np.abs(x.astype(np.float64))
        return np.where(up, np.nextafter(y, np.zeros((), t)), y).astype(t)


def good(x, dtype="bfloat16"):
    with np.errstate(over="ignore"):
        return x.astype(_target(dtype))
