"""The parent side of ``kcontract trace``: start the trace worker, run the model, and
write what came back as a :class:`~.kct.Trace`."""
from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Mapping, Optional

from .. import __version__
from ..check.sandbox import KernelLoadError, KernelProcess
from ..check.worker import source_sha256
from ..errors import UsageError
from .coverage import coverage
from .kct import Trace, Trial


class TraceProcess(KernelProcess):
    """A :class:`KernelProcess` whose worker runs a prelude first (the stack under test)
    and knows the ``trace`` verb.  ``kernel`` is ``MODEL.py:Model`` to trace a model, or a
    kernel spec for ``kcontract trace --check``."""

    worker_module = "kcontract.trace.worker"

    def __init__(self, kernel: str, *, framework: str = "torch", device: str = "cpu",
                 prelude: Optional[str] = None, timeout: float = 600.0,
                 guard_memory: bool = True, **kw):
        super().__init__(kernel, framework=framework, device=device, timeout=timeout, **kw)
        self.prelude = os.path.abspath(prelude) if prelude else None
        self.guard_memory = guard_memory

    def sibling(self) -> "TraceProcess":
        """The second worker (C-ORD-02 across processes) on the same stack: the same prelude."""
        sib = super().sibling()
        sib.prelude, sib.guard_memory = self.prelude, self.guard_memory
        return sib

    def load_payload(self) -> dict:
        d = super().load_payload()
        d["prelude"] = self.prelude
        # a traced model runs as the stack runs it: no NaN-filled allocations
        d["fill_uninitialized"] = self.guard_memory
        return d


def _check_file(path: str, what: str) -> str:
    if not os.path.isfile(path):
        raise UsageError(f"no such {what}: {path}")
    return os.path.abspath(path)


def trace_model(model: str, *, framework: str = "torch", device: str = "cpu",
                prelude: Optional[str] = None, seed: int = 0, trials: int = 1,
                budget: int = 64 << 20, label: Optional[str] = None,
                declare: Optional[Mapping[str, str]] = None, timeout: float = 600.0,
                record: bool = True) -> Trace:
    """Run ``model`` (a KernelBench-format file) in the trace worker and record every aten
    op of ``trials`` forward passes."""
    if framework != "torch":
        raise UsageError(f"kcontract trace records torch models; --framework {framework} is "
                         "not supported")
    model = _check_file(model, "model file")
    if prelude:
        prelude = _check_file(prelude, "prelude file")
    if trials < 1:
        raise UsageError("--trials must be at least 1")
    handle = TraceProcess(f"{model}:Model", device=device, prelude=prelude, timeout=timeout,
                          guard_memory=False)
    try:
        handle.start()
    except KernelLoadError as exc:
        if exc.spec_error:
            raise UsageError(f"{model} is not a KernelBench-format model file (it defines no "
                             f"Model): {exc}") from None
        raise UsageError(f"cannot load the model or its prelude: {exc}\n"
                         f"{handle.output_tail()}") from None
    try:
        res = handle.request("trace", {"seed": seed, "trials": trials, "budget": budget,
                                       "record": record})
        env = handle_environment(device)
    finally:
        tail = handle.output_tail()
        handle.close()
    if not res.ok:
        raise UsageError(f"tracing {model} failed: {res.describe()}\n{tail[-1500:]}")
    meta = res.meta
    trace_trials = [Trial(index=int(t["trial"]), seed=int(t["seed"]), status=t["status"],
                          first_op=int(t["first_op"]), end_op=int(t["end_op"]),
                          inputs=list(t.get("inputs") or []), output=t.get("output"),
                          error_type=t.get("error_type", ""), error=t.get("error", ""),
                          seconds=float(t.get("seconds") or 0.0)) for t in meta["trials"]]
    ops = meta["ops"]
    manifest = {
        "label": label or os.path.splitext(os.path.basename(prelude or model))[0],
        "model": os.path.basename(model), "model_sha256": source_sha256(model),
        "framework": framework, "device": device, "seed": int(seed), "trials_run": int(trials),
        "prelude": _prelude_entry(prelude), "declare": dict(declare or {}),
        "matmul_precision": meta.get("matmul_precision"), "parameters": meta.get("parameters"),
        "tensor_budget": int(budget), "tensor_bytes": meta.get("tensor_bytes"),
        "tensors_dropped": meta.get("tensors_dropped", 0), "environment": env,
        "coverage": coverage(ops).as_dict(), "kcontract_version": __version__,
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    return Trace(manifest, ops, trace_trials, dict(meta.get("tensors") or {}))


def handle_environment(device: str) -> dict:
    from ..adapters import get_adapter
    env = get_adapter("torch").environment(device)
    env["kcontract"] = __version__
    return env


def _prelude_entry(prelude: Optional[str]) -> Optional[dict]:
    if not prelude:
        return None
    with open(prelude, encoding="utf-8", errors="replace") as fh:
        source = fh.read()
    return {"file": os.path.basename(prelude), "sha256": source_sha256(prelude),
            "source": source}
