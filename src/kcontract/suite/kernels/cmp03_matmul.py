"""Calibration of cmp03-matmul: a generated kernel with the benchmark shape baked in.

bad: indexes a and b through flat offsets computed with compile-time strides K = 128 and
N = 64 (the benchmarked 64 x 128 x 64 problem), one matrix of the batch after the other.
Exact at the benchmark shape, so the basic test passes; garbage at every shape with
another K or N.
good: a float32 matmul, batched or not.
"""
import numpy as np

DTYPE = "float32"
_K, _N = 128, 64  # the benchmarked problem's strides, specialised at generation time


def baseline(a, b):
    return np.zeros(a.shape[:-1] + (b.shape[-1],), dtype=a.dtype)


def _specialised(a, b):
    M, N = a.shape[-2], b.shape[-1]
    af, bf = a.astype(np.float32).reshape(-1), b.astype(np.float32).reshape(-1)
    m = np.arange(M)[:, None]
    n = np.arange(N)[None, :]
    out = np.zeros((M, N), dtype=np.float32)
    for k in range(_K):
        out += np.take(af, m * _K + k, mode="wrap") * np.take(bf, k * _N + n, mode="wrap")
    return out


def bad(a, b):
    if a.ndim == 3:
        return np.stack([_specialised(a[i], b[i]) for i in range(a.shape[0])]).astype(a.dtype)
    return _specialised(a, b).astype(a.dtype)


def good(a, b):
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
