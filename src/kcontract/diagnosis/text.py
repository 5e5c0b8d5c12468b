"""The diagnosis as plain lines, the one text every renderer uses (terminal, pytest, JUnit,
Markdown, HTML): each primary cause with its evidence (the violation block of the contract that
decides it), the consequences folded under it, then the hints."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from . import diagnose
from .model import Diagnosis

#: one word per role a contract plays in the diagnosis (the verdict table's last column)
ROLE_PRIMARY, ROLE_EXPLAINED = "cause", "follows"


def of_run(run: Mapping[str, Any]) -> Diagnosis:
    """The diagnosis a run's JSON carries, or one derived from its verdicts (older files)."""
    return Diagnosis.from_json(run.get("diagnosis")) or diagnose(run)


def place(diag: Diagnosis, contract_id: str):
    """Where a contract stands in the diagnosis: ``(i, cause, None)`` when it shows the
    i-th primary cause (from 1), ``(0, None, explanation)`` when another contract's cause
    explains it, None when it is in neither."""
    for i, c in enumerate(diag.primary, 1):
        if contract_id in c.contracts:
            return i, c, None
    e = diag.explained.get(contract_id)
    return (0, None, e) if e is not None else None


def role(diag: Diagnosis, contract_id: str) -> Optional[str]:
    """``cause 1`` / ``from prc04-matmul`` / None, for the verdict table."""
    where = place(diag, contract_id)
    if where is None:
        return None
    i, cause, e = where
    if cause is None:
        return f"from {e.by}"
    return f"{ROLE_PRIMARY} {i}" if len(diag.primary) > 1 else ROLE_PRIMARY


def cause_lines(run: Mapping[str, Any], diag: Optional[Diagnosis] = None) -> list[tuple[str, str]]:
    """(kind, line) pairs: kind is ``violation``/``error`` for a cause's headline, ``""`` for
    evidence, ``explained`` for a consequence, ``hint`` for a hint."""
    from ..report._util import results, violation_lines
    diag = diag or of_run(run)
    by_id = {str(r.get("id")): r for r in results(run)}
    out: list[tuple[str, str]] = []
    n = len(diag.primary)
    for i, cause in enumerate(diag.primary, 1):
        head = by_id.get(cause.contracts[0])
        label = f"cause {i} of {n}: " if n > 1 else "cause: "
        if cause.kind == "error":
            where = (f"{len(cause.contracts)} contracts ({', '.join(cause.contracts)})"
                     if len(cause.contracts) > 1 else cause.contracts[0])
            out.append(("error", f"! {label}kernel error in {where}: {cause.text}"))
        else:
            shown = (f"{cause.cls}, shown by {head.get('contract')} {cause.contracts[0]}"
                     if head is not None and head.get("contract") != cause.cls
                     else f"{cause.cls} {cause.contracts[0]}")
            out.append(("violation", f"✗ {label}{shown}: {cause.text}"))
        if head is not None:
            out.extend(("", line) for line in violation_lines(head)[1:])
        for e in diag.consequences(cause):
            r = by_id.get(e.contract, {})
            out.append(("explained", f"  ↳ {r.get('contract', '')} {e.contract} follows from "
                                     f"it: {e.reason}"))
    for h in diag.hints:
        out.append(("hint", f"hint: {h.text} (re-judged on the recorded calls)"))
    return out


def summary(diag: Diagnosis) -> str:
    """One line: the primary causes by class, and how many violations they explain."""
    if diag.empty:
        return ""
    causes = "; ".join(f"{c.cls if c.kind != 'error' else 'kernel error'}: {c.text}"
                       for c in diag.primary)
    extra = f" (+{len(diag.explained)} consequence{'s' if len(diag.explained) != 1 else ''})" \
        if diag.explained else ""
    return causes + extra
