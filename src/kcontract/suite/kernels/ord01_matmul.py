"""Calibration of ord01-matmul: split-K with a float16 reduction workspace.

bad: K is split into slices of 64 (split-K); each slice's partial product is
computed in float32 (BLAS), stored to a float16 workspace, and the slices are
reduced by a pairwise tree in float16 -- the bandwidth-saving workspace of some
split-K GEMMs. Relative error ~5e-4: passes allclose(1e-2), but exceeds
gamma(K, u(float32)) * |a| @ |b|, and permuting the reduction index moves the
result by up to a float16 ulp, beyond 2x the bound.
good: one float32 GEMM (BLAS), within the worst-case bound for every order.
"""
import numpy as np

DTYPE = "float32"
SLICE = 64


def baseline(a, b):
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)


def bad(a, b):
    K = a.shape[-1]
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        parts = [np.matmul(a32[..., k:k + SLICE], b32[..., k:k + SLICE, :]).astype(np.float16)
                 for k in range(0, max(K, 1), SLICE)]
        while len(parts) > 1:
            nxt = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)]
            if len(parts) % 2:
                nxt.append(parts[-1])
            parts = nxt
    return parts[0].astype(a.dtype)


def good(a, b):
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
