"""Input families: how test inputs are drawn.

Each family maps ``(shape, rng, fmt)`` to float64 values that the caller then
rounds into the kernel's dtype.  ``fmt`` lets a family scale itself to the
format (large magnitudes near the overflow threshold, subnormals of the
format).  Families are far wider than ``rand``: signed, offset (cancellation),
large (overflow), subnormal, exact-integer.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import UsageError, did_you_mean
from ..formats import Format

Family = Callable[[tuple, np.random.Generator, Format], np.ndarray]
FAMILIES: dict[str, Family] = {}
DESCRIPTIONS: dict[str, str] = {}


def family(name: str, description: str):
    def deco(fn: Family) -> Family:
        FAMILIES[name] = fn
        DESCRIPTIONS[name] = description
        return fn
    return deco


def get_family(name: str) -> Family:
    if name not in FAMILIES:
        raise UsageError(f"unknown input family {name!r}{did_you_mean(name, FAMILIES)}")
    return FAMILIES[name]


@family("rand", "uniform [0, 1): what naive benchmarks use (never negative)")
def _rand(shape, rng, fmt):
    return rng.random(shape)


@family("uniform", "uniform (-1, 1): signed, so errors can cancel")
def _uniform(shape, rng, fmt):
    return rng.uniform(-1.0, 1.0, shape)


@family("normal", "standard normal N(0, 1)")
def _normal(shape, rng, fmt):
    return rng.standard_normal(shape)


@family("positive", "uniform [0.5, 1.5): all-positive, no cancellation, error bounds are tight")
def _positive(shape, rng, fmt):
    return rng.uniform(0.5, 1.5, shape)


@family("offset", "N(0, 1) plus a large common offset: exposes catastrophic cancellation")
def _offset(shape, rng, fmt):
    # The offset is large relative to the spread but well inside the format's
    # range, and squares of it stay finite: exposes E[x^2]-E[x]^2 formulations.
    off = min(1.0 / fmt.eps, np.sqrt(fmt.max) / 16) * 0.25
    off = min(off, 1e4) if fmt.precision <= 11 else min(off, 1e4)
    return off + rng.standard_normal(shape)


@family("large", "magnitudes near sqrt(max): exp/square of them overflows without rescaling")
def _large(shape, rng, fmt):
    scale = min(fmt.max ** 0.5, 1e4 if fmt.precision <= 11 else 1e6)
    return rng.uniform(-1.0, 1.0, shape) * scale + np.sign(rng.standard_normal(shape)) * scale * 0.5


@family("logits", "large positive and negative logits (|x| up to ~ log(max)+20): softmax overflow")
def _logits(shape, rng, fmt):
    hi = float(np.log(fmt.max)) + 20.0
    return rng.uniform(-1.0, 1.0, shape) * hi


@family("subnormal", "values in the format's subnormal range, with a few normal ones")
def _subnormal(shape, rng, fmt):
    lo, hi = fmt.smallest_subnormal, fmt.tiny
    mag = np.exp(rng.uniform(np.log(lo * 4), np.log(hi * 0.9), shape))
    return mag * np.where(rng.random(shape) < 0.5, -1.0, 1.0)


@family("integer", "small exact integers: every partial sum is exact in wide formats")
def _integer(shape, rng, fmt):
    hi = 4 if fmt.precision <= 8 else 8
    return rng.integers(-hi, hi + 1, shape).astype(np.float64)


def inject(values: np.ndarray, rng: np.random.Generator, kinds=("nan", "inf", "-inf"),
           count: int = 3) -> tuple[np.ndarray, list[tuple]]:
    """Put NaN/+Inf/-Inf at ``count`` random positions (per kind); returns the
    new array and the positions used."""
    out = np.array(values, dtype=np.float64, copy=True)
    flat = out.reshape(-1)
    pos = rng.choice(flat.size, size=min(flat.size, count * len(kinds)), replace=False)
    placed = []
    for i, p in enumerate(pos):
        kind = kinds[i % len(kinds)]
        flat[p] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[kind]
        placed.append((np.unravel_index(p, out.shape), kind))
    return out, placed
