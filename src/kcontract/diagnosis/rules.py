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

from ..formats import get_format, short_name
from .model import Finding

#: a finding's code -> (rank, the class of the cause it states); lower ranks are more
#: fundamental.  Codes not listed rank by their class (CLASS_RANK).
CODE_CAUSE: dict[str, tuple[int, str]] = {
    "C-PRC-04.format-substitution": (10, "C-PRC-04"),
    "C-PRC-04.rounding-mode": (10, "C-PRC-04"),
    "C-PRC-01.operand-substitution": (11, "C-PRC-04"),
    # Inf exactly where operands rounded to a narrower format overflow
    "C-EXC-01.narrow-overflow": (11, "C-PRC-04"),
    "C-PRC-01.narrow-accumulator": (20, "C-PRC-01"),
    "C-CMP-01.approximation-substituted": (30, "C-CMP-01"),
}
CLASS_RANK = {"C-PRC-04": 12, "C-PRC-01": 21, "C-CMP-01": 31, "C-PRC-03": 40, "C-PRC-02": 50,
              "C-EXC-02": 60, "C-EXC-01": 70, "C-ORD-02": 80, "C-ORD-03": 81, "C-CMP-02": 90,
              "C-CMP-03": 100, "C-ORD-01": 110}
ERROR_RANK = 0
SHAPE_FAULT_RANK = 5  # a shape-specific fault explains what other contracts see at other shapes

#: the precision faults: a kernel that computes less precisely than declared
PRECISION_CAUSES = ("C-PRC-04", "C-PRC-01", "C-CMP-01")


def shape_fault(f: Finding) -> bool:
    """A C-CMP-03 finding that establishes a shape-specific fault: a stale output, or
    failures at held-out shapes while every benchmarked shape passes."""
    if f.cls != "C-CMP-03":
        return False
    if f.signature == "stale-output":
        return True
    bench = _pass_rate(f.quantities.get("benchmark_pass_rate"))
    held = _pass_rate(f.quantities.get("heldout_pass_rate"))
    return bool(bench and held and bench[0] == bench[1] and held[0] < held[1])


def localized(f: Finding) -> bool:
    """A finding whose failing elements are a few positions of the last axis repeated across
    rows (a tail or boundary element computed wrongly): a fault of the kernel's handling of
    that position, C-CMP-03's kind of cause, whichever contract saw it."""
    return f.signature == "localized-error"


def rank(f: Finding, dtype: str = "float32") -> int:
    if f.is_error:
        return ERROR_RANK
    if shape_fault(f):
        return SHAPE_FAULT_RANK
    if localized(f):
        return SHAPE_FAULT_RANK + 1
    if f.code in CODE_CAUSE:
        return CODE_CAUSE[f.code][0]
    cause = cause_class(f, dtype)
    # a finding that states another class's cause comes after that class's own contract
    return CLASS_RANK.get(cause, 200) + (cause != f.cls)


def cause_class(f: Finding, dtype: str = "float32") -> str:
    """The class of the cause a finding states: its code's (a C-PRC-01 finding of operands
    substituted states C-PRC-04), C-PRC-03 for a finding whose worst element is a subnormal
    result flushed to zero (an op without a subnormal contract of its own), else its own."""
    if f.code in CODE_CAUSE:
        return CODE_CAUSE[f.code][1]
    if localized(f):
        return "C-CMP-03"
    stated = f.code.split(".", 1)[0]
    if stated != f.cls and stated in CLASS_RANK:
        return stated  # a code of another class (C-PRC-04.operand-substitution) states it
    if stable_growth(f):
        return "C-PRC-01"
    if f.cls in ("C-PRC-02", "C-EXC-01", "C-CMP-03", "C-ORD-01", "C-PRC-01") \
            and _worst_flushed(f, dtype):
        return "C-PRC-03"
    return f.cls


def stable_growth(f: Finding) -> bool:
    """A C-PRC-02 finding whose error grows like the condition number itself (fitted across
    conditioning levels), as a stable formulation's does: the formulation is not the cause,
    the working precision is (it states C-PRC-01)."""
    return f.cls == "C-PRC-02" and f.quantities.get("growth") == "linear"


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
    if stable_growth(f):
        return (f"the error grows like the condition number, as a stable formulation's does: "
                f"{what}, not the formulation")
    if f.cls == "C-PRC-02" and "normal" in (f.quantities.get("failing_families") or ()):
        return (f"it fails on the well-conditioned normal family too, where no formulation "
                f"cancels or overflows: {what}'s error, not the formulation's")
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
                return (f"operands in {short_name(opf)} overflow at {fo.max:g}: Inf where the "
                        f"{dtype} result is finite")
        if root.signature == "rounding-mode" and kinds <= {"overflow"}:
            return "rounding toward zero never rounds up to Inf: overflow saturates"
        return None
    if f.cls == "C-PRC-03":
        if opf and (f.quantities.get("nonfinite_outputs") or 0) > 0 \
                and get_format(opf).max < get_format(dtype).max:
            return (f"operands in {short_name(opf)} overflow at {get_format(opf).max:g}: the "
                    f"scaled subnormal cases' results come back as Inf or NaN")
        if opf and get_format(opf).tiny > get_format(dtype).tiny:
            return (f"operands in {short_name(opf)} have no numbers below "
                    f"{get_format(opf).smallest_subnormal:.3g}: {dtype} subnormals vanish")
        if f.signature in ("subnormal-wrong", "subnormal-precision") or \
                f.quantities.get("flushed") in (None, "none", ""):
            return f"subnormal results carry the error of {what}, not a flush"
        return None
    if f.cls == "C-CMP-02" and f.quantities.get("all_configs_fail"):
        return f"every configuration fails alike: {what}"
    return None


def _flush_explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    if cause_class(root, dtype) != "C-PRC-03" or f.cls == "C-PRC-03":
        return None
    if _worst_flushed(f, dtype):
        return "the failing results are subnormal results flushed to zero"
    return None


def _formulation_explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    if root.cls != "C-PRC-02" or stable_growth(root):
        return None
    if f.cls == "C-EXC-01":
        return ("the unstable formulation overflows or cancels: the exceptional values follow "
                "from it")
    if f.cls == "C-CMP-03":
        bench = _pass_rate(f.quantities.get("benchmark_pass_rate"))
        if bench is not None and bench[0] < bench[1]:
            return "the benchmarked shape fails too: the formulation, not the shape"
    return None


def _holds(predicate: str, shape) -> bool:
    """A shape predicate such as ``K % 32 != 0`` at ``shape`` (arithmetic and comparisons
    over the shape's symbols only; anything else does not hold)."""
    import ast
    import operator as op_
    ops = {ast.Add: op_.add, ast.Sub: op_.sub, ast.Mult: op_.mul, ast.Mod: op_.mod,
           ast.FloorDiv: op_.floordiv, ast.Eq: op_.eq, ast.NotEq: op_.ne, ast.Lt: op_.lt,
           ast.LtE: op_.le, ast.Gt: op_.gt, ast.GtE: op_.ge}

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in ops:
            return ops[type(node.ops[0])](ev(node.left), ev(node.comparators[0]))
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.Name):
            return int(shape[node.id])
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        raise ValueError(predicate)
    text = str(predicate).replace(" and ", " and ").replace(" or ", " or ")
    try:
        return bool(ev(ast.parse(text, mode="eval")))
    except (SyntaxError, ValueError, KeyError, ZeroDivisionError):
        return False


def _shape_explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    if not shape_fault(root) or f.cls == "C-CMP-03":
        return None
    if root.signature == "stale-output":
        return ("the kernel returns an earlier call's output: every contract that calls it "
                "with new inputs sees wrong results")
    shape = (f.violation.get("case") or {}).get("shape") if isinstance(f.violation, dict) else None
    pred = root.quantities.get("predicate")
    if isinstance(shape, dict) and pred and _holds(str(pred), shape):
        case = ",".join(f"{k}={v}" for k, v in shape.items())
        return f"its failing case ({case}) is a shape where the kernel is wrong ({pred})"
    return None


def _localized_explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    if not localized(root):
        return None
    a = (root.quantities.get("localized") or {}).get("positions")
    b = (f.quantities.get("localized") or {}).get("positions")
    if a and b and set(b) <= set(a):
        return "the same tail or boundary elements fail"
    return None


def _nondeterminism_explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    if root.cls == "C-ORD-02" and f.cls in ("C-ORD-03", "C-CMP-02"):
        return "run-to-run differences also change the bits between batch sizes and configurations"
    return None


RULES: tuple[Callable[[Finding, Finding, str], Optional[str]], ...] = (
    _shape_explains, _localized_explains, _precision_explains, _flush_explains, _formulation_explains, _nondeterminism_explains)


def explains(root: Finding, f: Finding, dtype: str) -> Optional[str]:
    for rule in RULES:
        try:
            why = rule(root, f, dtype)
        except (KeyError, ValueError, TypeError):
            why = None
        if why:
            return why
    return None
