"""The run-level diagnosis: the primary cause(s) of a kernel's failures, and for every other
violation the cause that explains it.

``diagnose(run)`` reads a run (a :class:`~kcontract.check.verdict.RunResult` or its JSON) and
returns a :class:`Diagnosis`: ``primary`` (the causes, each with the contracts that show it),
``explained`` (contract id -> the primary cause it follows from, and why) and ``hints`` (claims
under which the recorded evidence conforms, re-judged by :mod:`kcontract.diagnosis.hints`).
Identical kernel errors across contracts are one cause listing those contracts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional

from .model import Cause, Diagnosis, Explanation, Finding, Hint
from .rules import PRECISION_CAUSES, cause_class, explains, rank


def _as_json(run: Any) -> Mapping[str, Any]:
    if isinstance(run, Mapping):
        return run
    return {"dtype": run.dtype, "claims": dict(getattr(run, "claims", None) or {}),
            "results": [r.to_json() for r in run.results]}


#: the classes whose own finding can state the working precision as a cause
WORKING_PRECISION = ("C-PRC-04", "C-PRC-01")


@dataclass(frozen=True)
class _Fold:
    """The working precision as one cause: the hint ``accumulate=X`` under which the
    recorded calls pass, the finding that stands for it, the cause, and the findings it
    resolves (which follow from it)."""

    hint: Hint
    root: Finding
    cause: Cause
    ids: frozenset
    explained: dict
    #: the root is a precision finding of its own: its class's rules may explain others
    own: bool


def _fold_working_precision(fs: list[Finding], hints: Iterable[Hint], dtype: str,
                            data: Mapping[str, Any]) -> Optional[_Fold]:
    """The hint ``accumulate=X`` (X narrower than the claims' working precision and holding
    the data's range) that resolves the most findings, re-judged on the recorded calls: those
    findings are X's precision, not faults of their own classes.

    Not where a precision contract (C-PRC-01, C-PRC-04) of the run passed: the kernel has
    shown the declared precision there, and a narrower one would only loosen the others'
    tolerances until they pass.  A subnormal finding whose evidence is a flush (results
    equal to the oracle's with subnormals zeroed, subnormal results returned as zero) is
    a flush whatever the precision, and is never folded into it."""
    from ..formats import get_format, holds_range
    declared = str((data.get("claims") or {}).get("accumulate") or "")
    if not declared:
        return None
    if any(isinstance(r, Mapping) and r.get("verdict") == "pass"
           and r.get("contract") in WORKING_PRECISION for r in data.get("results") or ()):
        return None
    bad = {f.id for f in fs if not f.is_error and not (
        f.cls == "C-PRC-03" and str(f.quantities.get("flushed") or "none") not in ("none", ""))}
    best, ids = None, set()
    for h in hints:
        key, _, value = h.claim.partition("=")
        if key != "accumulate" or not holds_range(value, dtype):
            continue
        try:
            narrower = get_format(value).precision < get_format(declared).precision
        except Exception:
            continue
        got = set(h.resolves) & bad
        if narrower and (len(got) > len(ids) or (len(got) == len(ids) and got and value == dtype)):
            best, ids = h, got
    if best is None:
        return None
    value = best.claim.partition("=")[2]
    group = [f for f in fs if f.id in ids]
    root = next((f for f in group if cause_class(f, dtype) in WORKING_PRECISION), group[0])
    cls = cause_class(root, dtype)
    if cls in WORKING_PRECISION and not (root.code == "C-PRC-04.format-substitution"
                                         and value == dtype):
        cause = Cause(cls=cls, contracts=(root.id,), code=root.code,
                      text=_headline(root.message))
    else:
        # another class's finding standing for the working precision, or an operand
        # "substitution" by the input format itself (no substitution: the kernel keeps its
        # intermediates in the format its inputs came in): C-PRC-01's cause
        n = len(ids)
        cause = Cause(cls="C-PRC-01", contracts=(root.id,), code="C-PRC-01.narrow-accumulator",
                      text=f"computes in {value}, not the declared {declared}: the failing "
                           f"results of {n} contract{'s' if n != 1 else ''} are within the "
                           f"tolerance of {value} intermediates (each op rounded to {value}), "
                           f"re-judged on the recorded calls")
    explained = {f.id: Explanation(f.id, root.id, cause.cls,
                                   f"within the tolerance of {value} intermediates (re-judged "
                                   f"on the recorded calls): the working precision, not a "
                                   f"fault of this class")
                 for f in group if f is not root}
    return _Fold(best, root, cause, frozenset(ids), explained, own=cls in WORKING_PRECISION)


def findings(run: Any) -> list[Finding]:
    out = []
    for r in _as_json(run).get("results") or []:
        if isinstance(r, Mapping):
            f = Finding.from_result(r)
            if f is not None:
                out.append(f)
    return out


def _headline(message: str) -> str:
    """A finding's message without its trailing case count ("(3 of 4 cases fail)")."""
    import re
    return re.sub(r"\s*\(\d+ of \d+ cases fail\)\s*$", "", message).strip()


def diagnose(run: Any, hints: Iterable[Hint] = ()) -> Diagnosis:
    data = _as_json(run)
    dtype = str(data.get("dtype") or "float32")
    hints = tuple(hints)
    fs = sorted(findings(data), key=lambda f: rank(f, dtype))  # stable: suite order within a rank
    primary: list[tuple[Finding, list[str]]] = []  # (deciding finding, its contracts)
    explained: dict[str, Explanation] = {}
    fold = _fold_working_precision(fs, hints, dtype, data)
    if fold is not None:  # one cause, the working precision; what it resolves follows
        explained.update(fold.explained)
        primary.append((fold.root, [fold.root.id]))
        fs = [f for f in fs if f.id not in fold.ids]
    for f in fs:
        if f.is_error:
            same = next((p for p in primary if p[0].is_error and p[0].code == f.code
                         and p[0].message == f.message), None)
            if same is not None:
                same[1].append(f.id)
            else:
                primary.append((f, [f.id]))
            continue
        for root, ids in primary:
            if root.is_error or (fold is not None and root is fold.root and not fold.own):
                continue  # another class's finding standing for the working precision:
                # its own class's rules do not apply (it is not that class's fault)
            why = explains(root, f, dtype)
            if why and fold is not None and f.cls == "C-PRC-02" and f.id in fold.hint.still \
                    and cause_class(root, dtype) in PRECISION_CAUSES:
                # the formulation contract still fails with the narrower precision granted:
                # the formulation is a cause of its own (JAX's float16 one-pass variance)
                why = None
            if why:
                explained[f.id] = Explanation(f.id, root.id, cause_class(root, dtype), why)
                break
        else:
            primary.append((f, [f.id]))
    causes = []
    for root, ids in primary:
        if fold is not None and root is fold.root:
            causes.append(fold.cause)
            continue
        text = root.message if root.is_error else _headline(root.message)
        if fold is not None and root.id in fold.hint.still:
            # what the contract finds once the working precision is granted: its own fault
            text = (f"{_headline(fold.hint.still[root.id])} (judged with "
                    f"{fold.hint.claim.partition('=')[2]} intermediates)")
        causes.append(Cause(cls=cause_class(root, dtype) if not root.is_error else "kernel",
                            contracts=tuple(ids), code=root.code, text=text,
                            kind="error" if root.is_error else "violation"))
    return Diagnosis(tuple(causes), explained, tuple(hints))


__all__ = ["Cause", "Diagnosis", "Explanation", "Finding", "Hint", "diagnose",
           "findings"]
