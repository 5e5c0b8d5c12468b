"""The conformance matrix of a survey: ops x dtypes x classes, each cell with its verdict
and, where it fails, the primary cause; and two matrices side by side."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping, Optional

from ..errors import UsageError
from .cells import CHECKED, CellResult, ClassVerdict

SURVEY_SCHEMA = "kcontract.survey/1"


@dataclass
class SurveyMatrix:
    framework: str
    device: str
    ops: list[str]
    dtypes: list[str]
    classes: list[str]
    cells: dict = field(default_factory=dict)  # (op, dtype) -> CellResult
    environment: dict = field(default_factory=dict)
    executor: str = "serial"
    seconds: float = 0.0
    suite_version: str = ""
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(
        timespec="seconds"))

    @property
    def label(self) -> str:
        return f"{self.framework} {self.device}"

    def cell(self, op: str, dtype: str) -> Optional[CellResult]:
        return self.cells.get((op, dtype))

    def outcome(self) -> dict:
        """What two surveys of the same backend must agree on, cell by cell (not timings,
        not which process ran what)."""
        return {k: c.outcome() for k, c in sorted(self.cells.items())}

    def counts(self) -> dict:
        out: dict[str, int] = {}
        for c in self.cells.values():
            key = c.verdict if c.status == CHECKED else c.status
            out[key] = out.get(key, 0) + 1
        return out

    def levels(self) -> dict:
        """(op, dtype) -> the conformance level its checked verdicts reach (0-3)."""
        from ..records.certify import achieved_level
        out = {}
        for k, c in self.cells.items():
            if c.status == CHECKED and c.verdict != "n/a":
                verdicts = [{"contract": cls, "verdict": v.verdict} for cls, v in c.classes.items()
                            if v.verdict != "none"]
                out[k] = achieved_level(verdicts, 3)
        return out

    def backend_level(self) -> int:
        """The level every checked cell reaches: what the backend can be certified at over
        the ops it covers (0 when nothing was checked)."""
        lv = self.levels()
        return min(lv.values()) if lv else 0

    def to_json(self, with_runs: bool = False) -> dict:
        return {"schema": SURVEY_SCHEMA, "framework": self.framework, "device": self.device,
                "ops": self.ops, "dtypes": self.dtypes, "classes": self.classes,
                "environment": self.environment, "executor": self.executor,
                "seconds": round(self.seconds, 3), "suite_version": self.suite_version,
                "created": self.created, "counts": self.counts(),
                "backend_level": self.backend_level(),
                "levels": [{"op": op, "dtype": dt, "level": lv}
                           for (op, dt), lv in sorted(self.levels().items())],
                "cells": [c.to_json(with_runs) for _, c in sorted(self.cells.items())]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], where: str = "survey") -> "SurveyMatrix":
        if not isinstance(d, Mapping) or d.get("schema") != SURVEY_SCHEMA:
            raise UsageError(f"{where} is not a survey (expected schema {SURVEY_SCHEMA}, "
                             f"the JSON `kcontract survey --json` writes)")
        m = cls(framework=d["framework"], device=d["device"], ops=list(d["ops"]),
                dtypes=list(d["dtypes"]), classes=list(d["classes"]),
                environment=dict(d.get("environment") or {}), executor=d.get("executor", ""),
                seconds=float(d.get("seconds") or 0), suite_version=d.get("suite_version", ""),
                created=d.get("created", ""))
        for c in d.get("cells") or []:
            r = CellResult.from_json(c)
            m.cells[r.key] = r
        return m


# -- two backends side by side --------------------------------------------------------

@dataclass(frozen=True)
class Difference:
    op: str
    dtype: str
    cls: str  # a class id, or "" for the cell as a whole (coverage, status)
    a: str  # verdict (with the signature code where one fails)
    b: str
    a_cause: str = ""
    b_cause: str = ""

    @property
    def differs(self) -> bool:
        return self.a != self.b


def _state(c: Optional[CellResult], cls: str) -> tuple[str, str]:
    if c is None:
        return "absent", ""
    if c.status != CHECKED:
        return c.status, c.error
    v: ClassVerdict = c.classes.get(cls) or ClassVerdict("none")
    text = v.verdict + (f" ({v.code})" if v.code else "")
    if v.verdict not in ("violation", "error"):
        return text, ""
    # what the cell's diagnosis says of it: the cause it shows, or the one it follows from
    if v.role == "cause" and v.cause_class:
        return text, f"{v.cause_class}: {v.cause or v.message}"
    if v.role == "follows":
        return text + " [follows]", v.cause
    return text, v.message


def compare(a: SurveyMatrix, b: SurveyMatrix) -> list[Difference]:
    """Every (op, dtype, class) of either survey; the ones that differ first."""
    keys = sorted(set(a.cells) | set(b.cells))
    classes = list(dict.fromkeys(a.classes + b.classes))
    rows = []
    for op, dt in keys:
        ca, cb = a.cell(op, dt), b.cell(op, dt)
        if (ca is None or ca.status != CHECKED) or (cb is None or cb.status != CHECKED):
            sa, sb = _state(ca, ""), _state(cb, "")
            if ca is not None and ca.status == CHECKED:
                sa = (ca.verdict, "")
            if cb is not None and cb.status == CHECKED:
                sb = (cb.verdict, "")
            rows.append(Difference(op, dt, "", sa[0], sb[0], sa[1], sb[1]))
            continue
        for cls in classes:
            (sa, wa), (sb, wb) = _state(ca, cls), _state(cb, cls)
            if sa == "none" and sb == "none":
                continue
            rows.append(Difference(op, dt, cls, sa, sb, wa, wb))
    # differences between cells both surveys checked, then cells only one has, then the rest
    return sorted(rows, key=lambda r: (not r.differs, "absent" in (r.a, r.b), r.op, r.dtype,
                                       r.cls))
