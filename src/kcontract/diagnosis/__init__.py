"""The run-level diagnosis: the primary cause(s) of a kernel's failures, and for every other
violation the cause that explains it.

``diagnose(run)`` reads a run (a :class:`~kcontract.check.verdict.RunResult` or its JSON) and
returns a :class:`Diagnosis`: ``primary`` (the causes, each with the contracts that show it),
``explained`` (contract id -> the primary cause it follows from, and why) and ``hints`` (claims
under which the recorded evidence conforms, re-judged by :mod:`kcontract.diagnosis.hints`).
Identical kernel errors across contracts are one cause listing those contracts.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from .model import Cause, Diagnosis, Explanation, Finding, Hint
from .rules import PRECISION_CAUSES, cause_class, explains, rank


def _as_json(run: Any) -> Mapping[str, Any]:
    if isinstance(run, Mapping):
        return run
    return {"dtype": run.dtype, "claims": dict(getattr(run, "claims", None) or {}),
            "results": [r.to_json() for r in run.results]}


def _working_precision(fs: list[Finding], hints: Iterable[Hint], dtype: str,
                       declared_acc: str, passed: Iterable[str] = ()) -> tuple[Optional[Hint], set]:
    """The hint ``accumulate=X`` (X narrower than the claims' working precision) that
    resolves the most findings, and the ids it resolves: those findings are X's precision,
    re-judged on the recorded calls, not faults of their own classes.

    Not where a precision contract (C-PRC-01, C-PRC-04) of the run passed: the kernel has
    shown the declared precision there, and a narrower one would only loosen the others'
    tolerances until they pass.  A subnormal finding whose evidence is a flush (results
    equal to the oracle's with subnormals zeroed, subnormal results returned as zero) is
    a flush whatever the precision, and is never folded into it."""
    from ..formats import get_format
    best, ids = None, set()
    if set(passed) & {"C-PRC-01", "C-PRC-04"}:
        return None, set()
    bad = {f.id for f in fs if not f.is_error and not (
        f.cls == "C-PRC-03" and str(f.quantities.get("flushed") or "none") not in ("none", ""))}
    for h in hints:
        key, _, value = h.claim.partition("=")
        if key != "accumulate":
            continue
        try:
            w, acc, d = get_format(value), get_format(declared_acc), get_format(dtype)
            # a working precision that holds the inputs: narrower than declared, not a
            # narrower range than the data's (float16 intermediates for bfloat16 data would
            # pass flushed subnormals as "within float16's subnormal tolerance")
            fits = w.precision < acc.precision and w.emax >= d.emax and w.emin <= d.emin
        except Exception:
            fits = False
        got = set(h.resolves) & bad
        if fits and (len(got) > len(ids) or (len(got) == len(ids) and got and value == dtype)):
            best, ids = h, got
    return best, ids


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
    declared_acc = str((data.get("claims") or {}).get("accumulate") or "")
    passed = [str(r.get("contract")) for r in data.get("results") or ()
              if isinstance(r, Mapping) and r.get("verdict") == "pass"]
    hint, narrow = _working_precision(fs, hints, dtype, declared_acc, passed) \
        if declared_acc else (None, set())
    precision_cause = None
    if narrow:
        # one cause: the working precision; the findings it resolves follow from it
        group = [f for f in fs if f.id in narrow]
        root = next((f for f in group if cause_class(f, dtype) in PRECISION_CAUSES[:2]), group[0])
        value = hint.claim.partition("=")[2]
        for f in group:
            if f is not root:
                explained[f.id] = Explanation(
                    f.id, root.id, "C-PRC-01" if cause_class(root, dtype) not in
                    PRECISION_CAUSES[:2] else cause_class(root, dtype),
                    f"within the tolerance of {value} intermediates (re-judged on the recorded "
                    f"calls): the working precision, not a fault of this class")
        precision_cause = root
        primary.append((root, [root.id]))
        fs = [f for f in fs if f.id not in narrow]
        value_text = (value, declared_acc)
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
            if root.is_error or (root is precision_cause
                                 and cause_class(root, dtype) not in PRECISION_CAUSES[:2]):
                continue  # another class's finding standing for the working precision:
                # its own class's rules do not apply (it is not that class's fault)
            why = explains(root, f, dtype)
            if why and hint is not None and f.id in hint.still \
                    and cause_class(root, dtype) in PRECISION_CAUSES:
                why = None  # it still fails with the narrower precision granted: not that
            if why:
                explained[f.id] = Explanation(f.id, root.id, cause_class(root, dtype), why)
                break
        else:
            primary.append((f, [f.id]))
    causes = []
    for root, ids in primary:
        text = root.message if root.is_error else _headline(root.message)
        if hint is not None and root is not precision_cause and root.id in hint.still:
            # what the contract finds once the working precision is granted: its own fault
            text = (_headline(hint.still[root.id]) + f" (judged with {hint.claim.partition('=')[2]} "
                    f"intermediates)")
        cls = cause_class(root, dtype) if not root.is_error else "kernel"
        code = root.code
        if root is precision_cause and (cls not in PRECISION_CAUSES[:2] or (
                cls == "C-PRC-04" and root.code == "C-PRC-04.format-substitution"
                and value_text[0] == dtype)):
            # (an operand "substitution" by the input format itself is no substitution:
            # the kernel keeps its intermediates in the format its inputs came in)
            # a class's finding that is the working precision alone: the cause is C-PRC-01's
            value, acc = value_text
            n = len(narrow)
            cls, code = "C-PRC-01", "C-PRC-01.narrow-accumulator"
            text = (f"computes in {value}, not the declared {acc}: the failing results of "
                    f"{n} contract{'s' if n != 1 else ''} are within the tolerance of {value} "
                    f"intermediates (each op rounded to {value}), re-judged on the recorded "
                    f"calls")
        causes.append(Cause(cls=cls, contracts=tuple(ids), code=code, text=text,
                            kind="error" if root.is_error else "violation"))
    return Diagnosis(tuple(causes), explained, tuple(hints))


__all__ = ["Cause", "Diagnosis", "Explanation", "Finding", "Hint", "diagnose",
           "findings"]
