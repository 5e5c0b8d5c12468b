"""Dtype facts: unit roundoff, eps, ulp, subnormal range, max, and emulated rounding.

Every floating-point format kcontract knows is one row of :data:`FORMATS`.  The
numbers come from the formats' definitions (IEEE 754 binary64/32/16, bfloat16,
TF32, OCP FP8 E4M3FN / E5M2); numpy or ml_dtypes supply the storage types.  ml_dtypes
is imported on first use of one of its types (importing it costs about half a second,
which every isolated kernel process would otherwise pay for float32 work too).

Rounding into a format (:func:`round_to`) is round-to-nearest-even, emulated in
float64 where no native dtype exists (TF32), and done by the native cast otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from .errors import UsageError, did_you_mean


@dataclass(frozen=True)
class Format:
    """One floating-point format.

    ``precision`` is the significand width in bits including the implicit bit
    (p); unit roundoff is ``u = 2**-p``, machine epsilon ``eps = 2**(1-p)``.
    """

    name: str
    precision: int
    emin: int  # exponent of the smallest normal number
    emax: int  # exponent of the largest finite number
    max: float
    has_inf: bool
    #: numpy scalar type, or the name of an ml_dtypes type (imported on first use);
    #: None: emulated only (tf32)
    storage: Optional[object]
    short: str = ""

    @property
    def u(self) -> float:
        return 2.0 ** (-self.precision)

    @property
    def eps(self) -> float:
        return 2.0 ** (1 - self.precision)

    @property
    def tiny(self) -> float:
        """Smallest positive normal number."""
        return 2.0 ** self.emin

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.precision + 1)

    @property
    def bits(self) -> int:
        return self.dtype.itemsize * 8 if self.storage is not None else 19

    @property
    def dtype(self) -> np.dtype:
        if self.storage is None:
            raise UsageError(f"{self.name} has no storage dtype (it is emulated only)")
        if isinstance(self.storage, str):
            import ml_dtypes
            return np.dtype(getattr(ml_dtypes, self.storage))
        return np.dtype(self.storage)

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.name


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        Format("float64", 53, -1022, 1023, float(np.finfo(np.float64).max), True, np.float64, "fp64"),
        Format("float32", 24, -126, 127, float(np.finfo(np.float32).max), True, np.float32, "fp32"),
        Format("tfloat32", 11, -126, 127, float(2.0**127 * (2 - 2.0**-10)), True, None, "tf32"),
        Format("float16", 11, -14, 15, 65504.0, True, np.float16, "fp16"),
        Format("bfloat16", 8, -126, 127, float(2.0**127 * (2 - 2.0**-7)), True, "bfloat16", "bf16"),
        Format("float8_e4m3fn", 4, -6, 8, 448.0, False, "float8_e4m3fn", "fp8e4m3"),
        Format("float8_e5m2", 3, -14, 15, 57344.0, True, "float8_e5m2", "fp8e5m2"),
    ]
}

#: Formats a kernel may be checked at (``--dtype``).  TF32 is a recipe, not a storage type.
KERNEL_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")

ALIASES = {
    "fp64": "float64", "double": "float64", "f64": "float64",
    "fp32": "float32", "float": "float32", "f32": "float32", "single": "float32",
    "tf32": "tfloat32", "fp16": "float16", "half": "float16", "f16": "float16",
    "bf16": "bfloat16", "fp8e4m3": "float8_e4m3fn", "e4m3": "float8_e4m3fn",
    "fp8e5m2": "float8_e5m2", "e5m2": "float8_e5m2",
}

FormatLike = Union[str, Format, np.dtype, type]


def get_format(spec: FormatLike) -> Format:
    """Resolve a format name, alias, numpy dtype or :class:`Format`.

    Unknown names raise :class:`UsageError` with a did-you-mean hint.
    """
    if isinstance(spec, Format):
        return spec
    if not isinstance(spec, str):
        try:
            name = np.dtype(spec).name
        except TypeError as exc:
            raise UsageError(f"not a floating-point format: {spec!r}") from exc
        if name in FORMATS:
            return FORMATS[name]
        raise UsageError(f"not a supported floating-point format: {name}")
    key = spec.strip()
    if key in FORMATS:
        return FORMATS[key]
    if key.lower() in ALIASES:
        return FORMATS[ALIASES[key.lower()]]
    raise UsageError(f"unknown format {spec!r}{did_you_mean(key, list(FORMATS) + list(ALIASES))}")


def short_name(spec) -> str:
    """The short name of a format (``fp32``, ``bf16``); the spec itself where it names
    none or no format at all (for labels, never for decisions)."""
    try:
        return get_format(spec).short or str(spec)
    except UsageError:
        return str(spec)


def holds_range(fmt: FormatLike, data: FormatLike) -> bool:
    """Whether ``fmt`` can hold every finite value of ``data``, its normal and subnormal
    range included (float16 cannot hold bfloat16 data); False for an unknown format."""
    try:
        w, d = get_format(fmt), get_format(data)
    except UsageError:
        return False
    return w.emax >= d.emax and w.emin <= d.emin


def u(fmt: FormatLike) -> float:
    """Unit roundoff 2**-p."""
    return get_format(fmt).u


def eps(fmt: FormatLike) -> float:
    """Machine epsilon 2**(1-p): the gap between 1 and the next number."""
    return get_format(fmt).eps


def gamma(n, unit_roundoff):
    """Higham's gamma_n = n u / (1 - n u): the worst-case relative error bound of an
    n-term inner product in any order.  Infinite where n u >= 1."""
    n = np.asarray(n, dtype=np.float64)
    nu = n * unit_roundoff
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(nu < 1, nu / (1 - nu), np.inf)


def ulp(x, fmt: FormatLike) -> np.ndarray:
    """Unit in the last place of ``x`` in ``fmt`` (vectorised, float64 result).

    For |x| below the normal range the subnormal spacing is returned; for
    non-finite x, NaN.
    """
    f = get_format(fmt)
    x = np.abs(np.asarray(x, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(x > 0, np.floor(np.log2(np.where(x > 0, x, 1.0))), f.emin)
    e = np.maximum(e, f.emin)
    out = np.exp2(e - (f.precision - 1))
    return np.where(np.isfinite(x), out, np.nan)


def round_to(x, fmt: FormatLike, *, saturate: bool = False) -> np.ndarray:
    """Round ``x`` (any float array) to ``fmt`` with round-to-nearest-even; the
    result is returned as float64 values exactly representable in ``fmt``.

    Overflow gives +-inf where the format has infinities, NaN for float8_e4m3fn
    (OCP, non-saturating), or +-max with ``saturate=True``.
    """
    f = get_format(fmt)
    x = np.asarray(x, dtype=np.float64)
    if f.storage is not None:
        if f.name == "float64":
            r = x.copy()
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                r = _native_round(x, f)
    else:
        r = _emulated_round(x, f)
    if saturate:
        big = np.isinf(r) | (np.isnan(r) & ~np.isnan(x))
        r = np.where(big, np.sign(x) * f.max, r)
    return r


def _native_round(x: np.ndarray, f: Format) -> np.ndarray:
    if f.name == "float32" or f.name == "float16":
        return x.astype(f.storage).astype(np.float64)
    # ml_dtypes converts from float32 (double rounding hazard): cast from float64
    # directly, which ml_dtypes supports with correct rounding.
    return x.astype(f.dtype).astype(np.float64)


def _emulated_round(x: np.ndarray, f: Format) -> np.ndarray:
    """RNE into a format with an fp32-like exponent range and ``precision`` bits.

    Works on the float32 bit pattern: valid for formats narrower than float32
    with the same exponent field (TF32).
    """
    x32 = x.astype(np.float32)  # TF32 inputs are fp32 values
    bits = x32.view(np.uint32).astype(np.uint64)
    drop = 24 - f.precision
    half = np.uint64(1 << (drop - 1))
    mask = np.uint64((1 << drop) - 1)
    lsb = (bits >> np.uint64(drop)) & np.uint64(1)
    rounded = (bits + half - np.uint64(1) + lsb) & ~mask
    finite = np.isfinite(x32)
    out = np.where(finite, rounded, bits).astype(np.uint32).view(np.float32)
    return out.astype(np.float64)


def cast(x, fmt: FormatLike) -> np.ndarray:
    """Round ``x`` into ``fmt`` and return it in the format's storage dtype."""
    f = get_format(fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, dtype=np.float64).astype(f.dtype)


def representable(x, fmt: FormatLike) -> np.ndarray:
    """True where ``x`` is exactly representable in ``fmt``."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return (round_to(x, fmt) == x) | np.isnan(x)


def is_subnormal(x, fmt: FormatLike) -> np.ndarray:
    f = get_format(fmt)
    a = np.abs(np.asarray(x, dtype=np.float64))
    return (a > 0) & (a < f.tiny)


def table() -> list[dict]:
    """The facts of every format, one dict per row (for ``kcontract formats`` and docs)."""
    rows = []
    for f in FORMATS.values():
        rows.append({
            "name": f.name, "short": f.short, "precision": f.precision, "u": f.u, "eps": f.eps,
            "tiny": f.tiny, "smallest_subnormal": f.smallest_subnormal, "max": f.max,
            "has_inf": f.has_inf,
        })
    return rows
