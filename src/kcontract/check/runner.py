"""Run a kernel against contracts: the API behind ``kcontract check``."""
from __future__ import annotations

import time
from typing import Callable, Iterable, Mapping, Optional, Sequence

from .. import __version__
from ..adapters import FRAMEWORKS, get_adapter
from ..claims import make_claims
from ..errors import ContractError, UsageError, did_you_mean
from ..formats import KERNEL_DTYPES, get_format
from ..language.contract import Contract
from ..language.registry import protocols
from ..ops import get_op
from .engine import Context, KernelFailure, reproduce_command
from .sandbox import InProcessKernel, KernelLoadError, KernelProcess
from .verdict import ContractResult, RunResult, Status, Violation


def select_contracts(op: str, dtype: str, framework: str,
                     classes: Optional[Sequence[str]] = None,
                     contracts: Optional[Iterable[Contract]] = None) -> list[Contract]:
    """The contracts that apply to (op, dtype, framework), optionally only some classes or ids."""
    from ..classes import CLASSES
    if contracts is None:
        from ..suite import load_suite
        contracts = load_suite()
    contracts = list(contracts)
    wanted = list(classes or [])
    for w in wanted:
        if w not in CLASSES and not any(c.id == w for c in contracts):
            raise UsageError(f"unknown contract class or id {w!r}"
                             f"{did_you_mean(w, list(CLASSES) + [c.id for c in contracts])}")
    out = []
    for c in contracts:
        if c.op != op:
            continue
        if wanted and c.cls not in wanted and c.id not in wanted:
            continue
        out.append(c)
    return out


def _requires_met(contract: Contract, claims) -> Optional[str]:
    for key, want in (contract.scope.requires or {}).items():
        have = claims.get(key)
        have_cmp = getattr(have, "name", have)
        want_cmp = getattr(want, "name", want)
        if have_cmp != want_cmp:
            return f"applies only when {key}={want_cmp} is declared (declared: {have_cmp})"
    return None


def check(kernel: str, *, op: str, dtype: str, framework: str = "numpy", device: str = "cpu",
          classes: Optional[Sequence[str]] = None, declare: Optional[Mapping[str, object]] = None,
          seed: int = 0, in_process: bool = False, timeout: float = 60.0,
          contracts: Optional[Iterable[Contract]] = None,
          progress: Optional[Callable[[str, int], None]] = None,
          handle=None, reproduce_prefix: Optional[str] = None,
          hints: bool = False) -> RunResult:
    """Check ``kernel`` (``file.py:function`` or ``module:function``) against the
    contracts of ``op`` at ``dtype``.  Never raises for a kernel's misbehaviour:
    that is a verdict.  Raises :class:`UsageError` / :class:`ContractError` for
    bad arguments or contracts.  ``hints``: record the calls and re-judge them under the
    claims the primary causes suggest (:mod:`kcontract.diagnosis.hints`)."""
    t_start = time.perf_counter()
    op_obj = get_op(op)
    fmt = get_format(dtype)
    if fmt.name not in KERNEL_DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(KERNEL_DTYPES)}, not {dtype!r}")
    if framework not in FRAMEWORKS:
        raise UsageError(f"unknown framework {framework!r}{did_you_mean(framework, FRAMEWORKS)}")
    adapter = get_adapter(framework)
    declared = dict(declare or {})
    claims = make_claims(fmt, declared)
    chosen = select_contracts(op, fmt.name, framework, classes, contracts)
    env = adapter.environment(device)
    env["kcontract"] = __version__
    run = RunResult(kernel=kernel, op=op, dtype=fmt.name, framework=framework, device=device,
                    claims=claims.as_dict(), environment=env, suite_version=__version__)
    own_handle = handle is None
    try:
        if own_handle:
            handle_cls = InProcessKernel if in_process else KernelProcess
            handle = handle_cls(kernel, framework=framework, device=device, timeout=timeout)
            if hints:
                from ..arbitrate import RecordingHandle
                handle = RecordingHandle(handle)
            info = handle.start()
        else:
            info = handle.info
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
    try:
        for c in chosen:
            if reproduce_prefix:
                repro = f"{reproduce_prefix} --contract {c.id}" + (f" --seed {seed}" if seed else "")
            else:
                repro = reproduce_command(kernel, op, fmt.name, framework, device, c.cls, seed,
                                          declared)
            tick = (lambda cid=c.id: progress(cid, 1)) if progress else None
            run.results.append(_run_one(c, op_obj, fmt, claims, handle, framework, device, seed,
                                        repro, tick, run.timings))
            if progress:
                progress(c.id, 0)
    finally:
        if own_handle:
            handle.close()
    if hints and own_handle and hasattr(handle, "calls"):
        from ..diagnosis import diagnose
        from ..diagnosis.hints import find_hints
        found = find_hints(run, handle.calls, kernel=kernel, op=op, dtype=fmt.name,
                           framework=framework, device=device, declared=declared, seed=seed,
                           contracts=contracts)
        run.diagnosis = diagnose(run, found)
    run.seconds = time.perf_counter() - t_start
    run.timings["total"] = run.seconds
    return run


def _run_one(contract, op_obj, fmt, claims, handle, framework, device, seed, repro, tick,
             timings):
    t0 = time.perf_counter()
    if fmt.name not in contract.scope.dtypes:
        return ContractResult(contract=contract.cls, id=contract.id, verdict=Status.SKIPPED,
                              message=f"not in scope for dtype {fmt.name} (scope: "
                                      f"{', '.join(contract.scope.dtypes)})", reproduce=repro)
    if framework not in contract.scope.frameworks:
        return ContractResult(contract=contract.cls, id=contract.id, verdict=Status.SKIPPED,
                              message=f"not in scope for framework {framework}", reproduce=repro)
    why = _requires_met(contract, claims)
    if why:
        return ContractResult(contract=contract.cls, id=contract.id, verdict=Status.SKIPPED,
                              message=why, reproduce=repro)
    ctx = Context(contract, op_obj, fmt, claims, handle, framework=framework, device=device,
                  seed=seed, reproduce=repro, progress=tick)
    spec = protocols()[contract.protocol.kind]
    try:
        res = _protocol_run(spec, ctx, timings)
    except KernelFailure as fail:
        v = Violation(contract_id=contract.id, contract_class=contract.cls, case=fail.case,
                      code=fail.code, message=fail.message, reproduce=repro)
        res = ContractResult(contract=contract.cls, id=contract.id, verdict=Status.ERROR,
                             message=fail.message, tolerance=ctx.tolerance_text(), violation=v,
                             signature={"code": fail.code}, cases=ctx.cases, reproduce=repro)
    except (ContractError, UsageError):
        raise
    except Exception as exc:  # a bug of ours: say so, keep going
        import traceback
        res = ContractResult(contract=contract.cls, id=contract.id, verdict=Status.ERROR,
                             message=f"internal kcontract error (a bug in the checker, not in "
                                     f"your kernel): {type(exc).__name__}: {exc}",
                             signature={"code": "checker.bug"}, cases=ctx.cases, reproduce=repro,
                             details={"traceback": traceback.format_exc(limit=6)})
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
