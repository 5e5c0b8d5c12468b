"""Which finding is a root cause, and which findings a root cause explains.

A run's findings are ranked by how fundamental the fault they state is (a kernel error
first, then a format substitution, a narrower accumulator, an approximation, flushed
subnormals, an unstable formulation, an index policy, exceptional values, ordering,
configurations, shapes); each finding, in that order, is either explained by a cause
already chosen -- a rule below says why, from the evidence both findings carry -- or is a
primary cause of its own.  The rules read signature codes and quantities (never messages),
so a rule fires only on what a detector measured.
"""
from __future__ import annotations

import re
from typing import Callable, Optional

from ..formats import get_format
from .model import Finding

#: a finding's code -> (rank, the class of the cause it states); lower ranks are more
#: fundamental.  Codes not listed rank by their class (CLASS_RANK).
CODE_CAUSE: dict[str, tuple[int, str]] = {
    "C-PRC-04.format-substitution": (10, "C-PRC-04"),
    "C-PRC-04.rounding-mode": (10, "C-PRC-04"),
    "C-PRC-01.operand-substitution": (11, "C-PRC-04"),
    "C-PRC-01.narrow-accumulator": (20, "C-PRC-01"),
    "C-CMP-01.approximation-substituted": (30, "C-CMP-01"),
}
CLASS_RANK = {"C-PRC-04": 12, "C-PRC-01": 21, "C-CMP-01": 31, "C-PRC-03": 40, "C-PRC-02": 50,
              "C-EXC-02": 60, "C-EXC-01": 70, "C-ORD-02": 80, "C-ORD-03": 81, "C-CMP-02": 90,
              "C-CMP-03": 100, "C-ORD-01": 110}
ERROR_RANK = 0

#: the precision faults: a kernel that computes less precisely than declared
PRECISION_CAUSES = ("C-PRC-04", "C-PRC-01", "C-CMP-01")


def rank(f: Finding) -> int:
    if f.is_error:
        return ERROR_RANK
    if f.code in CODE_CAUSE:
        return CODE_CAUSE[f.code][0]
    return CLASS_RANK.get(f.cls, 200)


def cause_class(f: Finding) -> str:
    if f.code in CODE_CAUSE:
        return CODE_CAUSE[f.code][1]
    return f.cls


def _short(fmt: str) -> str:
    try:
        return get_format(fmt).short or fmt
    except Exception:
        return str(fmt)


def operand_format(f: Finding) -> Optional[str]:
    """The narrower operand format a precision finding measured (None if it names none)."""
    q = f.quantities
    for key in ("operand_format", "format"):
        val = q.get(key)
        if isinstance(val, str) and val:
            try:
                get_format(val)
                return val
            except Exception:
                continue
    return None


def _worst_flushed(f: Finding, dtype: str) -> bool:
    """The finding's worst element is a subnormal result returned as zero."""
    v = f.violation
    try:
        exp, act = float(v.get("expected")), float(v.get("actual"))
        return act == 0.0 and 0.0 < abs(exp) < get_format(dtype).tiny
    except (TypeError, ValueError):
        return False


def _counts(f: Finding) -> dict:
    c = f.quantities.get("counts")
    return dict(c) if isinstance(c, dict) else {}


def _pass_rate(text) -> Optional[tuple[int, int]]:
    m = re.match(r"\s*(\d+) of (\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


# -- the rules: (root, finding, dtype) -> the reason the root explains the finding, or None --

def _precision_explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    if cause_class(root) not in PRECISION_CAUSES:
        return None
    what = {"C-PRC-04": "the format substitution", "C-PRC-01": "the narrower accumulator",
            "C-CMP-01": "the substituted approximation"}[cause_class(root)]
    opf = operand_format(root)
    if f.cls in ("C-PRC-01", "C-PRC-04") and cause_class(f) in PRECISION_CAUSES:
        return f"{what} costs the precision this contract measures"
    if f.cls == "C-ORD-01":
        if f.quantities.get("finding") == "distance":
            return (f"a systematic error: the reduction orders agree with each other, all off "
                    f"the oracle by {what}")
        if cause_class(root) == "C-PRC-01":
            return "a narrower accumulator also spreads the reduction orders further apart"
        return None
    if f.cls == "C-CMP-03":
        bench = _pass_rate(f.quantities.get("benchmark_pass_rate"))
        if bench is not None and bench[0] < bench[1]:
            return (f"the benchmarked shape fails too: the shapes fail by {what}, not by "
                    f"a shape-specific fault")
        return None
    if f.cls == "C-EXC-01":
        kinds = set(_counts(f)) - {"value"}
        if not kinds:
            return f"only finite values beyond tolerance: {what}, not an exceptional semantic"
        if opf and kinds <= {"spurious-inf", "spurious-nan", "overflow"}:
            fo = get_format(opf)
            if fo.max < get_format(dtype).max:
                return (f"operands in {_short(opf)} overflow at {fo.max:g}: Inf where the "
                        f"{dtype} result is finite")
        if root.signature == "rounding-mode" and kinds <= {"overflow"}:
            return "rounding toward zero never rounds up to Inf: overflow saturates"
        return None
    if f.cls == "C-PRC-03":
        if opf and get_format(opf).tiny > get_format(dtype).tiny:
            return (f"operands in {_short(opf)} have no numbers below "
                    f"{get_format(opf).smallest_subnormal:.3g}: {dtype} subnormals vanish")
        if f.signature in ("subnormal-wrong", "subnormal-precision") or \
                f.quantities.get("flushed") in (None, "none", ""):
            return f"subnormal results carry the error of {what}, not a flush"
        return None
    if f.cls == "C-CMP-02" and f.quantities.get("all_configs_fail"):
        return f"every configuration fails alike: {what}"
    return None


def _flush_explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    if root.cls != "C-PRC-03" or f.cls == "C-PRC-03":
        return None
    if _worst_flushed(f, dtype):
        return "the failing results are subnormal results flushed to zero"
    return None


def _formulation_explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    if root.cls != "C-PRC-02":
        return None
    if f.cls == "C-EXC-01":
        return ("the unstable formulation overflows or cancels: the exceptional values follow "
                "from it")
    if f.cls == "C-CMP-03":
        bench = _pass_rate(f.quantities.get("benchmark_pass_rate"))
        if bench is not None and bench[0] < bench[1]:
            return "the benchmarked shape fails too: the formulation, not the shape"
    return None


def _nondeterminism_explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    if root.cls == "C-ORD-02" and f.cls in ("C-ORD-03", "C-CMP-02"):
        return "run-to-run differences also change the bits between batch sizes and configurations"
    return None


RULES: tuple[Callable[[Finding, Finding, str], Optional[str]], ...] = (
    _precision_explains, _flush_explains, _formulation_explains, _nondeterminism_explains)


def explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    for rule in RULES:
        try:
            why = rule(root, f, dtype)
        except (KeyError, ValueError, TypeError):
            why = None
        if why:
            return why
    return None
