"""Calibration of cmp03-cast: a leading dimension of 1 squeezed away.

bad: drops a leading dimension of size 1 (x.squeeze(0), written for batched inputs), so
a single-row input comes back as a vector. Exact (round to nearest even) at the
benchmarked 16 x 1024; the wrong output shape whenever R == 1.
good: the conversion, shape preserved.
"""
import ml_dtypes
import numpy as np

DTYPE = "float16"


def _target(dtype):
    return np.dtype(ml_dtypes.bfloat16) if str(dtype) == "bfloat16" else np.dtype(dtype)


def baseline(x, dtype="float16"):
    return np.zeros(x.shape, dtype=_target(dtype))


def bad(x, dtype="float16"):
    if x.ndim > 1 and x.shape[0] == 1:
        x = x[0]
    with np.errstate(over="ignore"):
        return x.astype(_target(dtype))


def good(x, dtype="float16"):
    with np.errstate(over="ignore"):
        return x.astype(_target(dtype))
