"""Declared claims: what a kernel promises about itself (``--declare KEY=VALUE``).

Contracts read these; defaults follow the usual expectations of each dtype.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..errors import UsageError, did_you_mean
from ..formats import Format, get_format


@dataclass(frozen=True)
class ClaimSpec:
    key: str
    kind: str  # "format" | "bool" | "choice"
    choices: tuple[str, ...] = ()
    help: str = ""


CLAIMS: dict[str, ClaimSpec] = {c.key: c for c in [
    ClaimSpec("accumulate", "format", help="format of the accumulator / working precision "
              "(default float32 for 16- and 32-bit inputs, float64 for float64, float32 for fp8)"),
    ClaimSpec("deterministic", "bool", help="identical inputs give bitwise identical outputs (default true)"),
    ClaimSpec("batch_invariant", "bool", help="a row's bits do not depend on the batch (default false)"),
    ClaimSpec("nan", "choice", ("propagate", "mask", "raise"), "NaN/Inf policy (default propagate)"),
    ClaimSpec("oob", "choice", ("raise", "clamp", "zero", "wrap", "undefined"),
              "out-of-range index policy (default raise)"),
    ClaimSpec("subnormals", "choice", ("preserve", "flush"), "subnormal policy (default preserve)"),
    ClaimSpec("overflow", "choice", ("inf", "nan", "saturate"),
              "overflow on conversion (default: what IEEE/OCP non-saturating conversion gives)"),
    ClaimSpec("approximation", "choice", ("none", "tanh"),
              "declared approximation substitution for gelu (default none)"),
]}

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def default_overflow(fmt: Format) -> str:
    return "inf" if fmt.has_inf else "nan"


@dataclass(frozen=True)
class Claims:
    accumulate: Format
    deterministic: bool = True
    batch_invariant: bool = False
    nan: str = "propagate"
    oob: str = "raise"
    subnormals: str = "preserve"
    overflow: str = "inf"
    approximation: str = "none"
    explicit: frozenset = field(default_factory=frozenset)  # keys the user declared

    def as_dict(self) -> dict:
        return {"accumulate": self.accumulate.name, "deterministic": self.deterministic,
                "batch_invariant": self.batch_invariant, "nan": self.nan, "oob": self.oob,
                "subnormals": self.subnormals, "overflow": self.overflow,
                "approximation": self.approximation}

    def get(self, key: str):
        return getattr(self, key)


def default_accumulate(dtype: Format) -> Format:
    return get_format("float64") if dtype.name == "float64" else get_format("float32")


def parse_value(key: str, raw) -> object:
    if key not in CLAIMS:
        raise UsageError(f"unknown claim {key!r}{did_you_mean(key, CLAIMS)}; known: {', '.join(CLAIMS)}")
    spec = CLAIMS[key]
    if spec.kind == "format":
        return get_format(str(raw))
    if spec.kind == "bool":
        if isinstance(raw, bool):
            return raw
        s = str(raw).strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
        raise UsageError(f"claim {key} must be true or false, not {raw!r}")
    s = str(raw).strip()
    if s not in spec.choices:
        raise UsageError(f"claim {key}={s!r} is not one of {', '.join(spec.choices)}"
                         f"{did_you_mean(s, spec.choices)}")
    return s


def make_claims(dtype: Format, declared: Mapping[str, object] | None = None) -> Claims:
    """Claims for a kernel at ``dtype``: defaults, overridden by ``declared``."""
    declared = dict(declared or {})
    values: dict = {"accumulate": default_accumulate(dtype), "overflow": default_overflow(dtype)}
    for k, v in declared.items():
        values[k] = parse_value(k, v)
    return Claims(**values, explicit=frozenset(declared))


def parse_declarations(items) -> dict[str, str]:
    """``["accumulate=float16", "nan=mask"]`` -> dict; malformed items raise UsageError."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise UsageError(f"--declare expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        k = k.strip()
        parse_value(k, v)  # validate now
        out[k] = v.strip()
    return out
