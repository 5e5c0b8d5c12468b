"""Three-state calibration: every contract proves that it discriminates.

For each contract of the suite, its calibration module
(``kcontract.suite.kernels.<id>``, hyphens and dots as underscores) provides
three kernels -- ``baseline`` (fails outright), ``bad`` (passes the basic
functional test, violates the contract) and ``good`` (conforms) -- and may set
``DTYPE`` (default: the first dtype of the contract's scope), ``DECLARE``
(claims, default none) and ``FRAMEWORK`` (default numpy).

The *basic functional test* is the one LLM-kernel benchmarks use: five trials
of uniform [0, 1) inputs at one fixed shape per op, ``allclose(atol=1e-2,
rtol=1e-2)`` against the reference.
"""
from __future__ import annotations

import importlib
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from ..errors import UsageError
from ..formats import get_format
from ..language.contract import Contract
from ..ops import get_op, upcast
from .runner import check
from .sandbox import KernelLoadError, KernelProcess
from .verdict import ROLES

BASIC_TRIALS = 5
BASIC_ATOL = BASIC_RTOL = 1e-2


def kernel_module_name(contract_id: str) -> str:
    return "kcontract.suite.kernels." + contract_id.replace("-", "_").replace(".", "_")


def basic_functional_test(handle, op_name: str, dtype: str, *, seed: int = 0) -> tuple[bool, str]:
    """Five trials, rand inputs, the op's basic shape, allclose(1e-2, 1e-2)."""
    op = get_op(op_name)
    fmt = get_format(dtype)
    shape = op.full_shape({})
    for trial in range(BASIC_TRIALS):
        rng = np.random.default_rng([seed, trial, 7])
        inputs = op.generate(shape, fmt, "rand", rng)
        kw = op.call_kwargs(fmt)
        accepts = (handle.info or {}).get("accepts")
        if accepts is not None and not (handle.info or {}).get("var_kw"):
            kw = {k: v for k, v in kw.items() if k in accepts}
        res = handle.call([inputs[n] for n in op.inputs], kw)
        if not res.ok:
            return False, res.describe()
        out = np.asarray(res.out)
        ref = op.oracle(upcast(inputs), **op.call_kwargs(fmt))
        if out.shape != ref.shape:
            return False, f"shape {out.shape} != {ref.shape}"
        if not np.allclose(out.astype(np.float64), ref, atol=BASIC_ATOL, rtol=BASIC_RTOL):
            return False, f"allclose failed on trial {trial}"
    return True, "passes"


@dataclass
class Cell:
    role: str
    basic: Optional[bool] = None
    basic_note: str = ""
    verdict: str = ""
    message: str = ""
    code: str = ""

    @property
    def expected(self) -> str:
        return {"baseline": "fails basic", "bad": "passes basic, violates contract",
                "good": "passes both"}[self.role]

    @property
    def sound(self) -> bool:
        if self.role == "baseline":
            return self.basic is False
        if self.role == "bad":
            return self.basic is True and self.verdict == "violation"
        return self.basic is True and self.verdict == "pass"


@dataclass
class Calibration:
    contract: Contract
    dtype: str
    framework: str
    cells: list = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0

    @property
    def sound(self) -> bool:
        return not self.error and len(self.cells) == 3 and all(c.sound for c in self.cells)

    def to_json(self) -> dict:
        return {"contract": self.contract.cls, "id": self.contract.id, "op": self.contract.op,
                "dtype": self.dtype, "framework": self.framework, "sound": self.sound,
                "error": self.error, "seconds": round(self.seconds, 3),
                "cells": [{"role": c.role, "basic": c.basic, "verdict": c.verdict,
                           "sound": c.sound, "code": c.code, "message": c.message}
                          for c in self.cells]}


def calibrate_contract(contract: Contract, *, seed: int = 0,
                       pool: Optional["WorkerPool"] = None) -> Calibration:
    t0 = time.perf_counter()
    modname = kernel_module_name(contract.id)
    try:
        mod = importlib.import_module(modname)
    except ModuleNotFoundError:
        return Calibration(contract, "", "", error=f"no calibration kernels ({modname})")
    dtype = getattr(mod, "DTYPE", contract.scope.dtypes[0])
    framework = getattr(mod, "FRAMEWORK", "numpy")
    declare = dict(getattr(mod, "DECLARE", {}) or {})
    cal = Calibration(contract, dtype, framework)
    for role in ROLES:
        if not hasattr(mod, role):
            cal.error = f"{modname} has no {role}()"
            break
        cell = Cell(role)
        spec = f"{modname}:{role}"
        own = pool is None
        pool = pool or WorkerPool()
        try:
            handle = pool.get(spec, framework)
            cell.basic, cell.basic_note = basic_functional_test(handle, contract.op, dtype,
                                                                seed=seed)
            handle.reload(spec)  # the contract sees a kernel with no earlier calls
            run = check(spec, op=contract.op, dtype=dtype, framework=framework,
                        declare=declare, seed=seed, contracts=[contract], handle=handle,
                        modules=False)
        except KernelLoadError as exc:
            cell.verdict, cell.message = "error", str(exc)
            cal.cells.append(cell)
            continue
        finally:
            if own:
                pool.close()
        res = run.results[0] if run.results else None
        if res is not None:
            cell.verdict = res.verdict.value
            cell.message = res.message
            cell.code = str((res.signature or {}).get("code", ""))
        cal.cells.append(cell)
    cal.seconds = time.perf_counter() - t0
    return cal


class WorkerPool:
    """One reusable worker per framework for calibration's trusted kernels."""

    def __init__(self):
        self.handles: dict[str, KernelProcess] = {}

    def get(self, spec: str, framework: str) -> KernelProcess:
        h = self.handles.get(framework)
        if h is None:
            h = KernelProcess(spec, framework=framework, timeout=60, decoys=False)
            h.start()
            self.handles[framework] = h
        else:
            h.reload(spec)
        return h

    def close(self) -> None:
        for h in self.handles.values():
            h.close()
        self.handles.clear()


def calibrate(classes: Optional[Sequence[str]] = None, ops: Optional[Sequence[str]] = None, *,
              seed: int = 0, progress: Optional[Callable[[Calibration], None]] = None,
              ) -> list[Calibration]:
    from ..classes import CLASSES
    from ..suite import load_suite
    for c in classes or ():
        if c not in CLASSES:
            raise UsageError(f"unknown contract class {c!r}")
    for o in ops or ():
        get_op(o)
    out = []
    pool = WorkerPool()
    try:
        with one_blas_thread():
            for contract in load_suite():
                if classes and contract.cls not in classes:
                    continue
                if ops and contract.op not in ops:
                    continue
                cal = calibrate_contract(contract, seed=seed, pool=pool)
                out.append(cal)
                if progress:
                    progress(cal)
    finally:
        pool.close()
    return out


@contextmanager
def one_blas_thread():
    """This process's BLAS (the checker's, never a worker's: the kernel keeps its threads)
    on one thread while the block runs (``threadpoolctl``).  The calibration's float64
    oracles are small products; BLAS threads, which keep spinning after each call, take
    the CPU from the kernel's worker when cores are few (on 2 cores the calibration's
    matmul contracts ran twice as long)."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        yield
