"""Shared emulation for the ordering calibration kernels (C-ORD-01..03).

On a GPU, the blocks of a split reduction reach an ``atomicAdd`` in whatever order
the hardware schedules them, and that order changes from run to run.  A CPU
emulation needs a source of "arrival order" that changes between calls the same
way; these kernels take it from a generator seeded with the number of calls the
process has made (:func:`arrival_rng`), so a calibration run is reproducible while
two consecutive calls still see different orders.
"""
import itertools

import numpy as np

_CALLS = itertools.count()


def arrival_rng() -> np.random.Generator:
    """A generator for this call's arrival order (differs from call to call)."""
    return np.random.default_rng([0x0D02, next(_CALLS)])


def arrival_orders(rng: np.random.Generator, tiles: int, parts: int) -> np.ndarray:
    """(tiles, parts): for each output tile, the order its partial results arrive in."""
    return np.argsort(rng.random((tiles, parts)), axis=1)


def accumulate(parts: np.ndarray, orders: np.ndarray, axis: int, tile: int) -> np.ndarray:
    """Add the partial results ``parts`` (shape (S, *out)) into a zeroed float32 output
    the way atomic adds do: one float32 addition per partial, each tile of ``tile``
    consecutive indices along ``axis`` of the output in its own order (``orders``)."""
    parts = np.asarray(parts, dtype=np.float32)
    S, shape = parts.shape[0], parts.shape[1:]
    ax = axis % len(shape)
    n = shape[ax]
    per_index = orders[np.arange(n) // tile]  # (n, S)
    view = [1] * (len(shape) + 1)
    view[ax + 1] = n
    acc = np.zeros(shape, dtype=np.float32)
    for step in range(S):
        idx = per_index[:, step].reshape(view)
        acc = acc + np.take_along_axis(parts, idx, axis=0)[0]
    return acc


def split(n: int, parts: int) -> list:
    """``parts`` contiguous slices covering range(n) (some empty when n < parts)."""
    bounds = np.linspace(0, n, parts + 1).astype(int)
    return [slice(int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]
