"""Calibration of prc01-linear_gelu: a split-K product with a float16 workspace.

bad: x @ w computed in K-chunks of 64 (fp32 within a chunk), the chunk results
accumulated in an fp16 workspace, then + b and gelu in fp32. Passes allclose(1e-2);
the pre-activation carries fp16-accumulator error.
"""
import math

import numpy as np

DTYPE = "float32"
CHUNK = 64
_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(pre):
    p = np.asarray(pre, dtype=np.float64)
    return 0.5 * p * (1.0 + _erf(p / math.sqrt(2.0)).astype(np.float64))


def baseline(x, w, b):
    return np.zeros((x.shape[0], w.shape[1]), dtype=x.dtype)


def bad(x, w, b):
    acc = np.zeros((x.shape[0], w.shape[1]), dtype=np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        for k0 in range(0, x.shape[1], CHUNK):
            part = np.matmul(x[:, k0:k0 + CHUNK], w[k0:k0 + CHUNK])
            acc = (acc.astype(np.float32) + part).astype(np.float16)
    pre = acc.astype(np.float32) + b
    return _gelu(pre).astype(x.dtype)


def good(x, w, b):
    pre = np.matmul(x, w) + b
    return _gelu(pre).astype(x.dtype)
