"""Calibration of exc01-softmax: a NaN guard that returns a uniform row.

bad: the stable softmax, then any row that came out non-finite is replaced by the
uniform distribution 1/N (a guard meant to "keep training alive"). Rand inputs
never trigger it: passes allclose(1e-2); a NaN or +Inf logit gives 1/N, not NaN.
"""
import numpy as np

DTYPE = "float32"


def _softmax(x):
    with np.errstate(all="ignore"):
        xf = x.astype(np.float32)
        m = np.max(xf, axis=-1, keepdims=True)
        e = np.exp(xf - m)
        return e / np.sum(e, axis=-1, keepdims=True)


def baseline(x):
    raise NotImplementedError("softmax kernel not implemented")


def bad(x):
    p = _softmax(x)
    broken = ~np.all(np.isfinite(p), axis=-1, keepdims=True)
    return np.where(broken, np.float32(1.0 / x.shape[-1]), p).astype(x.dtype)


def good(x):
    return _softmax(x).astype(x.dtype)
