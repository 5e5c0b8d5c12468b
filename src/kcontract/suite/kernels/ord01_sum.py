"""Calibration of ord01-sum: a multi-block reduction with a float16 workspace.

bad: each row is cut into blocks of 64 terms; a block is summed in float32, its
partial is written to a float16 workspace (half the bytes of the cross-block
traffic) and the partials are combined by a pairwise tree in float16. Relative
error ~1e-3 on all-positive rows: passes allclose(1e-2), but the float16 roundings
of the partials and of every tree level exceed gamma(n, u(float32)) * sum|x|, and
different orders of the same terms land up to a float16 ulp apart.
good: numpy's pairwise sum in float32, well inside the worst-case bound.
"""
import numpy as np

DTYPE = "float32"
BLOCK = 64


def baseline(x):
    return np.zeros(x.shape[:-1], dtype=x.dtype)


def _blocks(x):
    n = x.shape[-1]
    nb = max(1, -(-n // BLOCK))
    pad = np.zeros(x.shape[:-1] + (nb * BLOCK - n,), dtype=np.float32)
    xp = np.concatenate([x.astype(np.float32), pad], axis=-1)
    return xp.reshape(x.shape[:-1] + (nb, BLOCK))


def bad(x):
    with np.errstate(over="ignore", invalid="ignore"):
        parts = np.add.reduce(_blocks(x), axis=-1, dtype=np.float32).astype(np.float16)
        while parts.shape[-1] > 1:
            if parts.shape[-1] % 2:
                parts = np.concatenate([parts, np.zeros(parts.shape[:-1] + (1,), np.float16)],
                                       axis=-1)
            parts = parts[..., 0::2] + parts[..., 1::2]  # float16 + float16 -> float16
    return parts[..., 0].astype(x.dtype)


def good(x):
    return np.sum(x, axis=-1, dtype=np.float32).astype(x.dtype)
