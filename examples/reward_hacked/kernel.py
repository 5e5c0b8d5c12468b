"""Three matmul kernels, as a code generator optimising against a benchmark might return them.

The benchmark checks one fixed problem (64 x 128 x 64, float32) with a few random inputs
and allclose. Two of these kernels pass that check and are wrong; kcontract's C-CMP-03
(shape-polymorphism preservation) says how.

    matmul_honest               a float32 matmul; correct at every shape
    matmul_benchmark_shape_only tiles K by 32 and drops the remainder past the last full
                                tile: exact when K % 32 == 0 (the benchmark's K = 128),
                                silently wrong otherwise
    matmul_reuses_result        returns the result of an earlier call whenever the shapes
                                match: the result-reuse hack (a kernel whose output buffer
                                still holds an earlier result passes a harness that
                                computed that result on the same inputs just before)
"""
import numpy as np

TILE_K = 32


def matmul_honest(a, b):
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)


def matmul_benchmark_shape_only(a, b):
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    out = np.zeros(a.shape[:-1] + (b.shape[-1],), dtype=np.float32)
    full = a.shape[-1] // TILE_K * TILE_K  # the K remainder past the last full tile is dropped
    for k0 in range(0, full, TILE_K):
        out += np.matmul(a32[..., k0:k0 + TILE_K], b32[..., k0:k0 + TILE_K, :])
    return out.astype(a.dtype)


_EARLIER = {}


def matmul_reuses_result(a, b):
    key = (a.shape, b.shape, a.dtype.str)
    if key not in _EARLIER:
        _EARLIER[key] = matmul_honest(a, b)
    return _EARLIER[key].copy()
