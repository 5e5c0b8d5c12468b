"""Calibration of exc01-cast: a float32 -> float16 conversion that saturates.

bad: clip to +-65504 before the conversion (saturating, as many fp8/fp16 kernels
do), while the default overflow claim for float16 is inf. Infinities saturate too;
NaN survives the clip. Rand inputs are far below the range: passes allclose(1e-2).
"""
import ml_dtypes
import numpy as np

DTYPE = "float16"


def _target(dtype):
    return np.dtype(getattr(ml_dtypes, str(dtype), None) or dtype)


def baseline(x, dtype="float16"):
    return np.zeros(x.shape, dtype=_target(dtype))


def bad(x, dtype="float16"):
    t = _target(dtype)
    m = float(ml_dtypes.finfo(t).max)
    return np.clip(x, -m, m).astype(t)


def good(x, dtype="float16"):
    with np.errstate(all="ignore"):
        return x.astype(_target(dtype))
