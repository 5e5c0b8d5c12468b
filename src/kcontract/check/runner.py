"""Run a kernel against contracts: the API behind ``kcontract check``."""
from __future__ import annotations

import functools
import time
from typing import Callable, Iterable, Mapping, Optional, Sequence

from .. import __version__
from ..adapters import FRAMEWORKS, get_adapter
from ..language.claims import make_claims
from ..errors import ContractError, UsageError, did_you_mean
from ..formats import KERNEL_DTYPES, get_format
from ..language.contract import Contract
from ..language.registry import detectors, protocols
from ..ops import get_op, op_reference
from .engine import Context, KernelFailure, blame, reproduce_command
from .sandbox import InProcessKernel, KernelLoadError, KernelProcess
from .verdict import ContractResult, RunResult, Status


def select_contracts(op, dtype: str, framework: str,
                     classes: Optional[Sequence[str]] = None,
                     contracts: Optional[Iterable[Contract]] = None) -> list[Contract]:
    """The contracts about ``op`` (a name, a spec or an :class:`~kcontract.ops.Op`),
    optionally only some classes or ids: the suite's contracts of the op, or, for an op
    without contracts of its own in the suite (a user-defined one), the suite's generic
    contracts (``scope.op: any``).  Scope by dtype, framework and claims is decided per
    contract when it runs (:meth:`Contract.out_of_scope`, a ``skipped`` verdict)."""
    from ..classes import CLASSES
    name = get_op(op).name
    if contracts is None:
        from ..suite import load_generic, load_suite
        contracts = [c for c in load_suite() if c.covers_op(name)] or load_generic()
    contracts = list(contracts)
    wanted = list(classes or [])
    for w in wanted:
        if w not in CLASSES and not any(c.id == w for c in contracts):
            raise UsageError(f"unknown contract class or id {w!r}"
                             f"{did_you_mean(w, list(CLASSES) + [c.id for c in contracts])}")
    out = []
    for c in contracts:
        if not c.covers_op(name):
            continue
        if wanted and c.cls not in wanted and c.id not in wanted:
            continue
        out.append(c)
    return out


def resolve(contract: Contract):
    """The protocol, signature detector and oracle a contract names, from the registries
    of the suite's vocabulary: what the engine's :class:`Context` is handed."""
    from ..classes.oracles import ORACLE_REFERENCES
    spec = protocols().get(contract.protocol.kind)
    if spec is None:
        raise ContractError(f"{contract.id}: unknown protocol kind {contract.protocol.kind!r}")
    det = None
    if contract.signature.detector:
        det = detectors().get(contract.signature.detector)
        if det is None:
            raise ContractError(f"{contract.id}: unknown detector {contract.signature.detector!r}")
    oracle = ORACLE_REFERENCES.get(contract.oracle)
    if oracle is None:
        raise ContractError(f"{contract.id}: unknown oracle {contract.oracle!r}")
    return spec, det, oracle


def check(kernel: str, *, op, dtype: str, framework: str = "numpy", device: str = "cpu",
          classes: Optional[Sequence[str]] = None, declare: Optional[Mapping[str, object]] = None,
          seed: int = 0, in_process: bool = False, timeout: float = 60.0,
          contracts: Optional[Iterable[Contract]] = None,
          progress: Optional[Callable[[str, int], None]] = None,
          handle=None, reproduce_prefix: Optional[str] = None, sandbox=None,
          hints: bool = False, modules: bool = True) -> RunResult:
    """Check ``kernel`` (``file.py:function`` or ``module:function``) against the
    contracts of ``op`` (a name, an op spec ``ops.py:NAME`` / ``module:NAME``, or an
    :class:`~kcontract.ops.Op`) at ``dtype``.  Never raises for a kernel's misbehaviour:
    that is a verdict.  Raises :class:`UsageError` / :class:`ContractError` for
    bad arguments or contracts.  ``hints``: record the calls and re-judge them under the
    claims the primary causes suggest (:mod:`kcontract.diagnosis.hints`).  ``modules``:
    list (and hash) the module files the kernel's worker loaded, as certificates keep them;
    calibration, whose runs are not kept, skips it."""
    t_start = time.perf_counter()
    op_obj = get_op(op)
    op_ref = op if isinstance(op, str) else op_reference(op_obj)
    fmt = get_format(dtype)
    if fmt.name not in KERNEL_DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(KERNEL_DTYPES)}, not {dtype!r}")
    if framework not in FRAMEWORKS:
        raise UsageError(f"unknown framework {framework!r}{did_you_mean(framework, FRAMEWORKS)}")
    adapter = get_adapter(framework)
    declared = dict(declare or {})
    claims = make_claims(fmt, declared)
    chosen = select_contracts(op_obj, fmt.name, framework, classes, contracts)
    env = adapter.environment(device)
    env["kcontract"] = __version__
    run = RunResult(kernel=kernel, op=op_obj.name, dtype=fmt.name, framework=framework, device=device,
                    claims=claims.as_dict(), environment=env, suite_version=__version__)
    own_handle = handle is None
    try:
        if own_handle:
            handle_cls = InProcessKernel if in_process else KernelProcess
            extra = {} if in_process else {"sandbox": sandbox}
            handle = handle_cls(kernel, framework=framework, device=device, timeout=timeout,
                                **extra)
            if hints:
                from ..records.arbitrate import RecordingHandle
                handle = RecordingHandle(handle)
            info = handle.start()
        else:
            info = handle.info
            if hints:  # a worker the caller keeps (a survey's): record this run's calls
                from ..records.arbitrate import RecordingHandle
                handle = RecordingHandle(handle)
    except KernelLoadError as exc:
        if exc.spec_error:
            # no such file or function: the command is wrong, not the kernel
            raise UsageError(str(exc)) from None
        for c in chosen:
            run.results.append(ContractResult(contract=c.cls, id=c.id, verdict=Status.ERROR,
                                              message=str(exc), signature={"code": "kernel.load"}))
        run.seconds = time.perf_counter() - t_start
        return run
    run.kernel_hash = info.get("source_sha256", "")
    run.sandbox = str(getattr(handle, "sandbox_name", "none"))
    memo: dict = {}  # shared by the run's contracts (one recovery per recipe, say)
    try:
        for c in chosen:
            if reproduce_prefix:
                repro = f"{reproduce_prefix} --contract {c.id}" + (f" --seed {seed}" if seed else "")
            else:
                repro = reproduce_command(kernel, op_ref, fmt.name, framework, device, c.cls,
                                          seed, declared)
            tick = (lambda cid=c.id: progress(cid, 1)) if progress else None
            run.results.append(_run_one(c, op_obj, fmt, claims, handle, framework, device, seed,
                                        repro, tick, run.timings, memo))
            if progress:
                progress(c.id, 0)
        loaded = getattr(handle, "modules", None) if modules else None
        run.modules = list(loaded() if callable(loaded) else [])
        run.limits = dict(getattr(handle, "limits", None) or {})
        run.fp_state = str(getattr(handle, "fp_state", "") or "")
    finally:
        if own_handle:
            handle.close()
    if hints and hasattr(handle, "calls"):
        from ..diagnosis.hints import find_hints
        run.hints = tuple(find_hints(run, handle.calls, kernel=kernel, op=op, dtype=fmt.name,
                                     framework=framework, device=device, declared=declared,
                                     seed=seed, contracts=contracts))
    run.seconds = time.perf_counter() - t_start
    run.timings["total"] = run.seconds
    return run


def _run_one(contract, op_obj, fmt, claims, handle, framework, device, seed, repro, tick,
             timings, memo=None):
    t0 = time.perf_counter()
    why = contract.out_of_scope(op_obj.name, fmt.name, framework, claims)
    if why:
        return ContractResult(contract=contract.cls, id=contract.id, verdict=Status.SKIPPED,
                              message=why, reproduce=repro)
    spec, det, oracle = resolve(contract)
    make = functools.partial(Context, contract, op_obj, fmt, claims, framework=framework,
                             device=device, seed=seed, reproduce=repro, protocol_spec=spec,
                             detector=det, oracle=oracle)
    ctx = make(handle, progress=tick, memo=memo)

    def error(code, message, case=None, **kw):
        return ctx.result(Status.ERROR, message=message, violation=ctx.violation(
            None, code=code, message=message, case=case), **kw)
    try:
        res = _protocol_run(spec, ctx, timings)
    except KernelFailure as fail:
        res = error(fail.code, fail.message, fail.case)
    except (ContractError, UsageError):
        raise
    except Exception as exc:
        import traceback
        tb = {"traceback": traceback.format_exc(limit=6)}
        if blame(spec.run, make, op_obj, fmt):
            # the same judging completes with the reference as the output: the kernel's
            # values made it fail, so it is the kernel's verdict
            res = error("kernel.unjudgeable-output",
                        f"the kernel's output could not be judged: {type(exc).__name__}: "
                        f"{exc} (the same judging completes when the output is the reference)",
                        details=tb)
        else:  # a bug of ours: say so, keep going
            res = ctx.result(Status.ERROR, signature={"code": "checker.bug"}, details=tb,
                             message=f"internal kcontract error (a bug in the checker, not "
                                     f"in your kernel): {type(exc).__name__}: {exc}")
    if res.seconds == 0.0:
        res = _with_seconds(res, time.perf_counter() - t0)
    return res


def _protocol_run(spec, ctx, timings):
    try:
        return spec.run(ctx)
    finally:
        for k, v in ctx.timings.items():
            timings[k] = timings.get(k, 0.0) + v


def _with_seconds(res: ContractResult, seconds: float) -> ContractResult:
    from dataclasses import replace
    return replace(res, seconds=seconds)
