"""``kcontract trace --check``: every distinct (op, shape, dtype) of a trace against the
suite at the model's real shapes.

For each distinct call the suite's contracts of that op and dtype run on the stack's own
op (:mod:`.kernels`, in the trace worker after the same prelude), with each protocol's
shapes replaced by the call's shape (C-CMP-03 keeps its held-out shape class: it is
about other shapes) and, for protocols that draw inputs from families, one more family:
``recorded``, the call's real inputs from the trace (handed to the engine with the
contract, ``protocol.params["supplied_inputs"]``).
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Optional

from .coverage import op_call
from .kct import Trace

RECORDED = "recorded"
#: protocol kinds that draw their inputs from input families (they get ``recorded``)
FAMILY_KINDS = ("compare", "reorder", "repeat", "batch", "fusion")
#: protocol kinds whose shapes are not the model's business (held-out shapes)
OWN_SHAPES = ("shapes",)


@dataclass
class OpCheck:
    op: str
    dtype: str
    shape: dict
    calls: int
    aten: list
    modules: list
    run: dict  # the RunResult's JSON
    seconds: float = 0.0

    @property
    def bad(self) -> list:
        return [r for r in self.run.get("results", []) if r["verdict"] in ("violation", "error")]


@dataclass
class TraceCheck:
    checks: list = field(default_factory=list)
    not_checked: list = field(default_factory=list)  # (aten op, why)
    seconds: float = 0.0

    @property
    def violations(self) -> list:
        return [(c, r) for c in self.checks for r in c.bad]

    def to_json(self) -> dict:
        return {"schema": "kcontract.trace-check/1", "seconds": self.seconds,
                "checks": [{"op": c.op, "dtype": c.dtype, "shape": c.shape, "calls": c.calls,
                            "aten": c.aten, "modules": c.modules, "seconds": c.seconds,
                            "run": c.run} for c in self.checks],
                "not_checked": self.not_checked}

    def summary(self) -> str:
        lines = [f"checked {len(self.checks)} distinct (op, shape, dtype) in {self.seconds:.1f} s"]
        for c in self.checks:
            res = c.run.get("results", [])
            shape = ",".join(f"{k}={v}" for k, v in c.shape.items())
            state = (f"{len(c.bad)} of {len(res)} contracts fail: " + ", ".join(
                f"{r['contract']} {r['id']}" for r in c.bad)) if c.bad else \
                f"{sum(r['verdict'] == 'pass' for r in res)} of {len(res)} contracts pass"
            lines.append(f"  {c.op} {shape} {c.dtype} ({c.calls} call(s), "
                         f"{', '.join(c.aten)}): {state}")
        if self.not_checked:
            lines.append(f"not checked: {len(self.not_checked)} distinct call(s) ("
                         + ", ".join(sorted({a for a, _ in self.not_checked})) + ")")
        return "\n".join(lines)


def distinct_calls(trace: Trace) -> "OrderedDict[tuple, dict]":
    """(op, shape, dtype) -> the first call (in the op's convention), its count, aten ops
    and module paths."""
    from ..ops import get_op
    out: OrderedDict = OrderedDict()
    for rec in trace.ops:
        if rec.get("status") != "ok":
            continue
        call = op_call(rec, trace.tensors)
        if call is None:
            continue
        shape = get_op(call.op).solve_shape(call.inputs)
        key = (call.op, tuple(sorted(shape.items())), call.dtype,
               tuple(sorted((k, str(v)) for k, v in {**call.kwargs, **call.declare}.items())))
        entry = out.setdefault(key, {"call": call, "shape": dict(shape), "calls": 0,
                                     "aten": [], "modules": []})
        entry["calls"] += 1
        if rec["op"] not in entry["aten"]:
            entry["aten"].append(rec["op"])
        if rec.get("module") and rec["module"] not in entry["modules"]:
            entry["modules"].append(rec["module"])
    return out


def at_shape(contract, shape: dict, inputs: Optional[dict], kwargs: Mapping):
    """A copy of ``contract`` measured at ``shape``, with the recorded inputs as an extra
    input family where the protocol draws from families."""
    proto = contract.protocol
    if proto.kind in OWN_SHAPES:
        return contract
    params = dict(proto.params or {})
    if kwargs:
        params["kwargs"] = {**(params.get("kwargs") or {}), **kwargs}
    families = tuple(proto.families)
    if inputs is not None and proto.kind in FAMILY_KINDS:
        families = families + (RECORDED,)
        params["supplied_inputs"] = {RECORDED: inputs}
    return replace(contract, protocol=replace(proto, shapes=(dict(shape),), families=families,
                                              params=params))


def check_trace(trace: Trace, *, device: str = "cpu", prelude: Optional[str] = None,
                declare: Optional[Mapping[str, str]] = None,
                progress: Optional[Callable[[str], None]] = None,
                timeout: float = 60.0, classes: Optional[list] = None) -> TraceCheck:
    """Check every distinct (op, shape, dtype) of ``trace`` on the stack ``prelude``
    configures (``classes``: only these contract classes or ids)."""
    from ..check.runner import check, select_contracts
    from ..ops import OPS
    from .process import TraceProcess
    t0 = time.perf_counter()
    result = TraceCheck()
    handle = None
    try:
        for (op, _, dtype, _), entry in distinct_calls(trace).items():
            if op not in OPS:
                result.not_checked.append((", ".join(entry["aten"]), f"kcontract has no op {op}"))
                continue
            call = entry["call"]
            kw = {k: v for k, v in call.kwargs.items()}
            # the recorded inputs in the op's convention (addmm's a and b: the bias is not
            # part of matmul, and the stack's matmul kernel is called without it)
            contracts = [at_shape(c, entry["shape"], dict(call.inputs), kw)
                         for c in select_contracts(op, dtype, "torch", classes)]
            kernel = f"kcontract.trace.kernels:{op}"
            if handle is None:  # one worker: the prelude and torch are loaded once
                handle = TraceProcess(kernel, device=device, prelude=prelude, timeout=timeout)
                handle.start()
            elif handle.kernel != kernel:
                handle.reload(kernel)
            t1 = time.perf_counter()
            run = check(kernel, op=op, dtype=dtype, framework="torch", device=device,
                        declare={**(declare or {}), **call.declare}, contracts=contracts,
                        handle=handle, hints=True)
            oc = OpCheck(op, dtype, entry["shape"], entry["calls"], entry["aten"],
                         entry["modules"], run.to_json(), time.perf_counter() - t1)
            result.checks.append(oc)
            if progress:
                bad = ", ".join(f"{r['contract']}" for r in oc.bad)
                progress(f"  {op} {','.join(f'{k}={v}' for k, v in entry['shape'].items())} "
                         f"{dtype}: " + (f"violates {bad}" if bad else "conforms")
                         + f" ({oc.seconds:.1f} s)")
    finally:
        if handle is not None:
            handle.close()
    result.seconds = time.perf_counter() - t0
    return result
