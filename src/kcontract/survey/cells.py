"""One survey cell: the library's implementation of one op at one dtype, checked against
every contract of the suite that applies, through the normal check engine.

:func:`run_cell` is what every executor runs (here, in a pool process, in a Ray task);
it takes and returns plain values, so it crosses process and machine boundaries.  In a
process that runs many cells it keeps one isolated kernel worker per framework and
device and loads each op's implementation into it, so a framework is imported once per
process rather than once per cell (the worker is still replaced after any crash or
tampering).
"""
from __future__ import annotations

import atexit
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Optional

from .devices import visibility

#: cell states besides a finished check
CHECKED, NOT_COVERED, UNSUPPORTED, LOST = "checked", "not covered", "unsupported", "lost"
#: a class with no contract for the op
NO_CONTRACT = "none"


@dataclass(frozen=True)
class Cell:
    """What to check: plain values, picklable."""

    framework: str
    device: str
    op: str
    dtype: str
    seed: int = 0
    timeout: float = 60.0
    classes: tuple[str, ...] = ()
    declare: tuple[tuple[str, str], ...] = ()  # claims (KEY, VALUE), as --declare gives them
    store: Optional[str] = None  # record the run here, in the process that ran it

    @property
    def key(self) -> tuple[str, str]:
        return (self.op, self.dtype)


@dataclass(frozen=True)
class ClassVerdict:
    """One class of one cell: the verdict of its contract(s) and the primary cause."""

    verdict: str  # pass | violation | error | skipped | none
    contracts: tuple[str, ...] = ()
    code: str = ""  # signature code of the primary failing contract
    message: str = ""
    tolerance: str = ""
    reproduce: str = ""
    #: where the failing contract stands in the cell's diagnosis: ``cause`` (it shows a
    #: primary cause), ``follows`` (another contract's cause explains it) or ``""``
    role: str = ""
    #: for ``cause``: the cause's class and what it is; for ``follows``: the explaining
    #: contract's cause class and the reason
    cause_class: str = ""
    cause: str = ""
    cause_code: str = ""  # the cause's signature code (the class's own code, or C-PRC-01's)

    @classmethod
    def from_results(cls, results: list[Mapping[str, Any]],
                     diagnosis: Optional[Mapping[str, Any]] = None) -> "ClassVerdict":
        if not results:
            return cls(NO_CONTRACT)
        rank = {"error": 0, "violation": 1, "pass": 2, "skipped": 3}
        primary = min(results, key=lambda r: rank.get(r.get("verdict"), 0))
        sig = primary.get("signature") or {}
        bad = primary.get("verdict") in ("violation", "error")
        role, cause_class, cause, cause_code = "", "", "", ""
        if bad and diagnosis:
            from ..diagnosis.model import Diagnosis
            from ..diagnosis.text import place
            where = place(Diagnosis.from_json(diagnosis), str(primary.get("id")))
            if where is not None and where[1] is not None:
                c = where[1]
                role, cause_class, cause, cause_code = "cause", c.cls, c.text, c.code
            elif where is not None:
                e = where[2]
                role, cause_class = "follows", e.by_class
                cause = f"explained by {e.by}: {e.reason}"
        return cls(verdict=str(primary.get("verdict")),
                   contracts=tuple(str(r.get("id")) for r in results),
                   code=str(sig.get("code") or "") if bad else "",
                   message=str(primary.get("message") or ""),
                   tolerance=str(primary.get("tolerance") or ""),
                   reproduce=str(primary.get("reproduce") or ""),
                   role=role, cause_class=cause_class, cause=cause, cause_code=cause_code)


@dataclass
class CellResult:
    op: str
    dtype: str
    status: str  # checked | not covered | unsupported | lost
    function: str = ""
    classes: dict = field(default_factory=dict)  # class id -> ClassVerdict
    verdict: str = ""  # conformant | violation | error (checked cells)
    run: Optional[dict] = None  # the check's full run JSON (not kept in the matrix's JSON)
    run_id: Optional[int] = None  # its id in the results store
    where: dict = field(default_factory=dict)  # host, pid, Ray node, visible devices
    attempts: int = 1
    seconds: float = 0.0
    error: str = ""
    #: the run's diagnosis (``{primary, explained, hints}``, as the check's JSON has it)
    diagnosis: dict = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.op, self.dtype)

    @property
    def causes(self) -> list[dict]:
        """The cell's primary causes (class, contracts, code, cause), from its diagnosis;
        for a cell without one (an older file), each failing class is its own."""
        if self.diagnosis.get("primary"):
            return list(self.diagnosis["primary"])
        return [{"class": cid, "contracts": list(cv.contracts), "code": cv.code,
                 "cause": cv.message, "kind": cv.verdict}
                for cid, cv in sorted(self.classes.items()) if cv.verdict in ("violation", "error")]

    @property
    def hints(self) -> list[str]:
        return [str(h.get("text", "")) for h in self.diagnosis.get("hints") or ()]

    @property
    def primary(self) -> Optional[tuple[str, ClassVerdict]]:
        """The failing class that shows the cell's first primary cause (an error before a
        violation where no diagnosis says otherwise)."""
        for cid, cv in sorted(self.classes.items()):
            if cv.role == "cause":
                return cid, cv
        for want in ("error", "violation"):
            for cid, cv in sorted(self.classes.items()):
                if cv.verdict == want:
                    return cid, cv
        return None

    def outcome(self) -> tuple:
        """What two runs of the same cell must agree on: status, verdicts, signature codes,
        the primary causes."""
        return (self.status, self.verdict,
                tuple(sorted((c, v.verdict, v.code, v.role) for c, v in self.classes.items())),
                tuple(sorted(str(c.get("class")) for c in self.causes)))

    def to_json(self, with_run: bool = False) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("classes", "run")}
        d["classes"] = {c: asdict(v) for c, v in sorted(self.classes.items())}
        d["seconds"] = round(self.seconds, 3)
        if with_run:
            d["run"] = self.run
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CellResult":
        classes = {c: ClassVerdict(**{**v, "contracts": tuple(v.get("contracts") or ())})
                   for c, v in (d.get("classes") or {}).items()}
        keep = {k: d[k] for k in ("op", "dtype", "status", "function", "verdict", "run_id",
                                  "where", "attempts", "seconds", "error", "diagnosis") if k in d}
        return cls(classes=classes, run=d.get("run"), **keep)


def summarize(run_json: Mapping[str, Any], classes: tuple[str, ...] = ()) -> dict:
    """Class id -> ClassVerdict over every class of the taxonomy (``none`` where the
    suite has no contract for the op)."""
    from ..classes import CLASSES
    by_class: dict[str, list] = {c: [] for c in (classes or CLASSES)}
    for r in run_json.get("results") or []:
        by_class.setdefault(str(r.get("contract")), []).append(r)
    diag = run_json.get("diagnosis") if isinstance(run_json.get("diagnosis"), Mapping) else None
    return {c: ClassVerdict.from_results(rs, diag) for c, rs in by_class.items()}


def where_am_i() -> dict:
    out = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        ray = sys.modules.get("ray")  # loaded in a Ray worker; never imported just to ask
        if ray is not None and ray.is_initialized():
            ctx = ray.get_runtime_context()
            out["ray_node"] = ctx.get_node_id()
            out["ray_accelerators"] = {k: list(v) for k, v in
                                       (ctx.get_accelerator_ids() or {}).items() if v}
    except Exception:
        pass
    vis = visibility()
    if vis:
        out["visible_devices"] = vis
    return out


# -- the kernel workers this process keeps ---------------------------------------------

_HANDLES: dict = {}


def _handle(framework: str, device: str, timeout: float):
    from ..check.sandbox import KernelProcess
    key = (framework, device, timeout)
    h = _HANDLES.get(key)
    if h is None:
        h = _HANDLES[key] = KernelProcess("", framework=framework, device=device, timeout=timeout)
    return h


@atexit.register
def close_workers() -> None:
    for h in _HANDLES.values():
        try:
            h.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass
    _HANDLES.clear()


def run_cell(cell: Cell) -> CellResult:
    """Check one cell; never raises for the library's behaviour (that is a verdict)."""
    from ..check.runner import check
    from ..check.sandbox import KernelLoadError
    from .table import kernel_spec, load_table
    t0 = time.perf_counter()
    impl = load_table(cell.framework).get(cell.op)
    if impl is None:
        return CellResult(cell.op, cell.dtype, NOT_COVERED)
    spec = kernel_spec(cell.framework, cell.op)
    common = dict(op=cell.op, dtype=cell.dtype, framework=cell.framework, device=cell.device,
                  classes=list(cell.classes) or None, seed=cell.seed, timeout=cell.timeout,
                  declare=dict(cell.declare))
    handle = _handle(cell.framework, cell.device, cell.timeout)
    try:
        handle.reload(spec)
    except KernelLoadError:
        handle = None  # check() starts its own worker and reports the load failure
    try:
        run = check(spec, handle=handle, hints=True, **common)
    except Exception:
        close_workers()
        raise
    data = run.to_json()
    res = CellResult(cell.op, cell.dtype, CHECKED, function=impl.describe(),
                     classes=summarize(data, cell.classes), verdict=data["verdict"], run=data,
                     where=where_am_i(), seconds=time.perf_counter() - t0,
                     diagnosis=dict(data.get("diagnosis") or {}))
    if run.nothing_checked() is not None:
        res.verdict = "n/a"
    if cell.store is not None:
        res.run_id = record(data, cell.store)
    return res


def record(run_json: Mapping[str, Any], store: Optional[str]) -> Optional[int]:
    """Record one cell's run in the results store (``""``: the default store)."""
    from ..records.store import record_run
    return record_run(run_json, store or None)
