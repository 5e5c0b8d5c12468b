"""Bit-accurate rounding for emulated matrix units, vectorised in float64.

A matrix unit's accumulator is a significand of ``p`` bits (the implicit bit
included: IEEE fp32 is 24) rounded by one of :data:`MODES`.  Partial sums are
carried as a float64 value ``hi`` plus a remainder ``lo`` (an error-free
:func:`two_sum` chain), so that a group of products is summed exactly (up to a
sticky remainder whose sign is kept) before the single rounding to ``p`` bits:
no double rounding through float64 changes a tie or a truncation.

The accumulator's exponent range is float64's (wide enough for every probe);
operand and output formats have their own range, subnormals and overflow
(:func:`round_to_format`).
"""
from __future__ import annotations

import numpy as np

from ..formats import get_format, round_to

#: rounding modes of an accumulator or an operand conversion
MODES = ("nearest", "toward_zero", "nearest_away", "up", "down")
MODE_TEXT = {"nearest": "round to nearest, ties to even",
             "toward_zero": "round toward zero (truncation)",
             "nearest_away": "round to nearest, ties away from zero",
             "up": "round toward +infinity", "down": "round toward -infinity"}


def two_sum(a, b):
    """(s, e) with s = fl(a + b) and a + b = s + e exactly."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def exact_sum(columns, start=None):
    """The sum of ``columns`` (a list of equal-shaped arrays, plus ``start``) as
    (hi, lo): hi the float64 sum, lo the remainder (exact to a sticky bit)."""
    hi = np.zeros_like(columns[0]) if start is None else np.array(start, dtype=np.float64)
    lo = np.zeros_like(hi)
    with np.errstate(invalid="ignore", over="ignore"):
        for c in columns:
            hi, e = two_sum(hi, c)
            lo = lo + e
        # an overflowed sum stays what it is (its remainder inf - inf would make it NaN)
        hi, lo = two_sum(hi, np.where(np.isfinite(hi), lo, 0.0))
    return hi, np.where(np.isfinite(hi), lo, 0.0)


def round_bits(hi, lo=None, p: int = 24, mode: str = "nearest") -> np.ndarray:
    """``hi + lo`` rounded to ``p`` significand bits (p <= 52) by ``mode``, with an
    unbounded exponent.  Works on the float64 bit pattern: the dropped bits decide,
    and a nonzero ``lo`` is a sticky bit (below the last float64 bit of ``hi``)."""
    if mode not in MODES:
        raise ValueError(f"unknown rounding mode {mode!r}; known: {', '.join(MODES)}")
    hi = np.asarray(hi, dtype=np.float64)
    finite = np.isfinite(hi) & (hi != 0)
    h = np.where(finite, hi, 1.0)
    bits = np.abs(h).view(np.uint64)
    neg = h < 0
    if lo is None:
        sticky = np.zeros(h.shape, dtype=bool)
    else:
        lo = np.where(finite, np.asarray(lo, dtype=np.float64), 0.0)
        sticky = lo != 0
        # a remainder that lowers the magnitude: the float64 just below, plus a sticky bit
        bits = bits - ((lo != 0) & ((lo < 0) != neg)).astype(np.uint64)
    D = np.uint64(53 - int(p))
    one = np.uint64(1)
    mask = (one << D) - one
    half = one << (D - one)
    dropped = bits & mask
    base = bits & ~mask
    if mode == "toward_zero":
        up = np.zeros(h.shape, dtype=bool)
    else:
        above = (dropped > half) | ((dropped == half) & sticky)
        tie = (dropped == half) & ~sticky
        inexact = (dropped != 0) | sticky
        if mode == "nearest":
            up = above | (tie & (((base >> D) & one) == one))
        elif mode == "nearest_away":
            up = above | tie
        elif mode == "up":
            up = inexact & ~neg
        else:
            up = inexact & neg
    r = (base + (up.astype(np.uint64) << D)).view(np.float64)
    return np.where(finite, np.where(neg, -r, r), hi)


def round_to_format(x, fmt, mode: str = "nearest", flush: bool = False) -> np.ndarray:
    """``x`` rounded into a storage format by ``mode`` (subnormals kept unless ``flush``:
    a subnormal *input* is read as zero).  Overflow gives inf for the nearest modes (NaN
    in formats without inf) and the largest finite value toward zero."""
    f = get_format(fmt)
    x = np.asarray(x, dtype=np.float64)
    if flush:
        x = np.where(np.abs(x) < f.tiny, 0.0 * x, x)
    if f.name == "float64":
        return x.copy()
    if mode == "nearest":
        with np.errstate(over="ignore", invalid="ignore"):
            if f.storage is None:
                return round_to(x, f)
            return x.astype(f.dtype).astype(np.float64)
    q = f.smallest_subnormal
    to_int = {"toward_zero": np.trunc, "up": np.ceil, "down": np.floor,
              "nearest_away": lambda v: np.copysign(np.floor(np.abs(v) + 0.5), v)}[mode]
    with np.errstate(over="ignore", invalid="ignore"):
        normal = round_bits(x, None, f.precision, mode)
        sub = to_int(x / q) * q  # the subnormal range: a fixed quantum
        r = np.where(np.abs(x) < f.tiny, sub, normal)
        over = np.isfinite(x) & (np.abs(r) > f.max)
        r = np.where(over, np.copysign(f.max, x), r)
    return r


def flush_subnormal(x, fmt) -> np.ndarray:
    f = get_format(fmt)
    x = np.asarray(x, dtype=np.float64)
    return np.where((np.abs(x) < f.tiny) & (x != 0), 0.0 * x, x)


__all__ = ["MODES", "MODE_TEXT", "two_sum", "exact_sum", "round_bits", "round_to_format",
           "flush_subnormal"]
