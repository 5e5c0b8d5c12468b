"""The run-level diagnosis: the primary cause(s) of a kernel's failures, and for every other
violation the cause that explains it.

``diagnose(run)`` reads a run (a :class:`~kcontract.check.verdict.RunResult` or its JSON) and
returns a :class:`Diagnosis`: ``primary`` (the causes, each with the contracts that show it),
``explained`` (contract id -> the primary cause it follows from, and why) and ``hints`` (claims
under which the recorded evidence conforms, re-judged by :mod:`kcontract.diagnosis.hints`).
Identical kernel errors across contracts are one cause listing those contracts.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from .model import Cause, Diagnosis, Explanation, Finding, Hint
from .rules import cause_class, explains, rank


def _as_json(run: Any) -> Mapping[str, Any]:
    if isinstance(run, Mapping):
        return run
    return {"dtype": run.dtype, "results": [r.to_json() for r in run.results]}


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
    fs = sorted(findings(data), key=lambda f: rank(f, dtype))  # stable: suite order within a rank
    primary: list[tuple[Finding, list[str]]] = []  # (deciding finding, its contracts)
    explained: dict[str, Explanation] = {}
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
            if root.is_error:
                continue
            why = explains(root, f, dtype)
            if why:
                explained[f.id] = Explanation(f.id, root.id, cause_class(root, dtype), why)
                break
        else:
            primary.append((f, [f.id]))
    causes = []
    for root, ids in primary:
        text = root.message if root.is_error else _headline(root.message)
        causes.append(Cause(cls=cause_class(root, dtype) if not root.is_error else "kernel",
                            contracts=tuple(ids), code=root.code, text=text,
                            kind="error" if root.is_error else "violation"))
    return Diagnosis(tuple(causes), explained, tuple(hints))


__all__ = ["Cause", "Diagnosis", "Explanation", "Finding", "Hint", "diagnose",
           "findings"]
