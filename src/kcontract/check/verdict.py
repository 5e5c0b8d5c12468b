"""Verdicts and violations: frozen values, computed once, rendered elsewhere."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Mapping, Optional

import numpy as np

RUN_SCHEMA = "kcontract.run/1"

#: the run's verdict -> the exit status of ``kcontract check`` (2: usage, 3: a checker bug)
EXIT_CODES = {"conformant": 0, "violation": 1, "error": 4}


class Status(str, Enum):
    PASS = "pass"
    VIOLATION = "violation"
    ERROR = "error"
    SKIPPED = "skipped"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.value


@dataclass(frozen=True)
class Diagnosis:
    """What a signature detector says about a violation: *how* it broke.

    ``summary``: the headline of the violation; ``quantities``: the signature quantities
    (recorded with the violation and in the verdict's signature); ``code``: a more
    specific signature code of the same class than the contract's default (e.g.
    ``operand-substitution``), or None; ``details``: tables for reports (merged into the
    verdict's details)."""

    summary: str = ""
    quantities: Mapping[str, Any] = field(default_factory=dict)
    code: Optional[str] = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, value) -> "Diagnosis":
        """A detector's return value as a Diagnosis (None: an empty one)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        raise TypeError(f"a detector must return a Diagnosis, not {type(value).__name__}")

    def __bool__(self) -> bool:
        return bool(self.summary or self.quantities)


@dataclass(frozen=True)
class Case:
    """One measured situation: shape, dtype, seed, input family (and extras)."""

    shape: Mapping[str, int]
    dtype: str
    seed: int
    family: str
    trial: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in self.shape.items())
        extra = "".join(f" {k}={v}" for k, v in self.extra.items())
        return f"{shape} {self.dtype} family={self.family} seed={self.seed}{extra}"


@dataclass(frozen=True)
class Violation:
    """What broke and how: measured against allowed, at the worst element."""

    contract_id: str
    contract_class: str
    case: Case
    code: str  # stable signature code: never parsed back out of the message
    message: str  # the headline
    mismatched: int = 0
    total: int = 0
    index: Optional[tuple] = None  # worst element
    actual: Optional[float] = None  # out[index]
    expected: Optional[float] = None  # ref[index]
    max_abs: Optional[float] = None
    max_rel: Optional[float] = None
    allowed: Optional[float] = None  # tolerance at the worst element
    measured: Optional[float] = None  # |error| at the worst element
    quantities: Mapping[str, Any] = field(default_factory=dict)  # signature quantities
    reproduce: str = ""

    @property
    def share(self) -> float:
        return self.mismatched / self.total if self.total else 0.0


@dataclass(frozen=True)
class ContractResult:
    contract: str  # class ID (C-PRC-01)
    id: str  # contract id
    verdict: Status
    message: str = ""
    tolerance: str = ""  # the tolerance formula and its value range, always reported
    violation: Optional[Violation] = None
    signature: Mapping[str, Any] = field(default_factory=dict)
    cases: int = 0
    seconds: float = 0.0
    reproduce: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)  # plot data, tables

    def to_json(self) -> dict:
        d = {
            "contract": self.contract, "id": self.id, "verdict": self.verdict.value,
            "signature": jsonable(dict(self.signature)) if self.signature else None,
            "message": self.message, "reproduce": self.reproduce,
            "tolerance": self.tolerance, "cases": self.cases, "seconds": round(self.seconds, 4),
        }
        if self.violation is not None:
            d["violation"] = jsonable(asdict(self.violation))
        if self.details:
            d["details"] = jsonable(dict(self.details))
        return d


#: the three implementations that calibrate a contract
ROLES = ("baseline", "bad", "good")


def nothing_checked(verdicts) -> Optional[str]:
    """Over (verdict, message) pairs: why nothing was checked when every one is
    ``skipped`` (or there are none), else None.  The one rule for runs and their JSON."""
    verdicts = list(verdicts)
    if any(v != Status.SKIPPED.value for v, _ in verdicts):
        return None
    return "; ".join(sorted({m for _, m in verdicts if m})) or "no contract applies"


@dataclass
class RunResult:
    kernel: str
    op: str
    dtype: str
    framework: str
    device: str
    claims: Mapping[str, Any]
    environment: Mapping[str, Any]
    results: list[ContractResult] = field(default_factory=list)
    kernel_hash: str = ""
    suite_version: str = ""
    seconds: float = 0.0
    #: where the time went: kernel, call (round trips incl. kernel), oracle, total
    timings: dict = field(default_factory=dict)
    #: the sandbox the kernel ran in: bubblewrap, none, or in-process
    sandbox: str = "none"
    #: the files of the modules the kernel's worker loaded from outside the Python
    #: installation, each with its sha256 as read by the checker: [{path, sha256}]
    modules: list = field(default_factory=list)
    #: the worker's resource limits: {name: {limit, enforced (cgroup v1/v2, rlimit, no),
    #: why}} (kcontract.check.limits)
    limits: dict = field(default_factory=dict)
    #: who read the worker's floating-point control state: "checker (ptrace)" or
    #: "worker-reported" (the kernel could have rebound the report)
    fp_state: str = ""
    #: claims that, declared, would make the kernel conform, re-judged on the recorded calls
    #: (kcontract.diagnosis.hints; found only with ``check(hints=True)``)
    hints: tuple = ()

    @property
    def verdict(self) -> str:
        states = {r.verdict for r in self.results}
        if Status.ERROR in states:
            return "error"
        if Status.VIOLATION in states:
            return "violation"
        return "conformant"

    @property
    def exit_code(self) -> int:
        """0 conformant, 1 a violation, 4 a kernel error (it raised, crashed, hung, returned
        the wrong shape or dtype, tampered, failed to import) and no violation."""
        return EXIT_CODES[self.verdict]

    def nothing_checked(self) -> Optional[str]:
        """Why nothing was checked, when every selected contract was skipped (or none
        applied); None when something ran.  A vacuous "conformant" must not pass a gate."""
        return nothing_checked((r.verdict.value, r.message) for r in self.results)

    def to_json(self) -> dict:
        return {
            "schema": RUN_SCHEMA, "kernel": self.kernel, "kernel_hash": self.kernel_hash,
            "op": self.op, "dtype": self.dtype, "framework": self.framework,
            "device": self.device, "claims": jsonable(dict(self.claims)),
            "environment": jsonable(dict(self.environment)),
            "suite_version": self.suite_version, "seconds": round(self.seconds, 3),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "verdict": self.verdict, "sandbox": self.sandbox,
            "limits": jsonable(dict(self.limits)), "fp_state": self.fp_state,
            "modules": [dict(m) for m in self.modules],
            "results": [r.to_json() for r in self.results],
            "diagnosis": self.diagnosed().to_json(),
        }

    def diagnosed(self):
        """The run's diagnosis (primary causes, explained violations, hints)."""
        from ..diagnosis import diagnose
        return diagnose(self, self.hints)


def jsonable(obj: Any) -> Any:
    """Plain-JSON form of numpy scalars, arrays, tuples, enums, non-finite floats."""
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    return obj
