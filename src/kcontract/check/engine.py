"""The measurement engine: what every protocol stands on.

A protocol (registered in :mod:`kcontract.classes`) receives a :class:`Context`
and returns a :class:`~.verdict.ContractResult`.  The context draws seeded
inputs, calls the kernel through its isolated handle, validates what comes back
(shape, dtype, integrity flags), computes the float64 oracle, evaluates the
contract's tolerance and postcondition, and builds violations.
"""
from __future__ import annotations

import shlex
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import numpy as np

from ..language.claims import Claims
from ..errors import ContractError
from ..diagnosis import claims as declared_claims
from ..formats import Format
from ..language.contract import Contract
from ..ops import Op, upcast
from .sandbox import CallResult
from .verdict import Case, ContractResult, Diagnosis, Status, Violation


class KernelFailure(Exception):
    """The kernel failed in a way that makes the verdict ``error`` (raised, crashed,
    hung, wrong shape or dtype, tampered with its process).  Protocols that expect
    a failure (a declared ``raise``) call :meth:`Context.call` instead."""

    def __init__(self, code: str, message: str, case: Optional[Case] = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.case = case


INTEGRITY_MESSAGES = {
    "state": "the kernel changed process-wide numeric state ({})",
    "patched": "the kernel monkeypatched {}",
    "mutated-input": "the kernel modified its input #{}",
    "aliased-output": "the kernel's output aliases its input #{}",
    "introspect": "the kernel inspected what it was not given ({}: stack frames, the garbage "
                  "collector's objects or a tracer)",
    "late-write": "the kernel changed an output after returning it ({}: a thread it left "
                  "running)",
    "strides": "the kernel's output has overlapping or broadcast strides {} (elements share "
               "memory: a constant or partly computed output)",
}


@dataclass
class Comparison:
    """Candidate against oracle under the contract's tolerance, for one case."""

    case: Case
    ok: np.ndarray  # bool, output-shaped: postcondition holds
    out: np.ndarray
    ref: np.ndarray
    tol: Optional[np.ndarray]
    env: dict = field(repr=False, default_factory=dict)

    @property
    def mismatched(self) -> int:
        return int(np.size(self.ok) - np.count_nonzero(self.ok))

    @property
    def total(self) -> int:
        return int(np.size(self.ok))

    @property
    def passed(self) -> bool:
        return self.mismatched == 0

    def error(self) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.abs(self.out - self.ref)

    def worst_index(self) -> Optional[tuple]:
        if self.total == 0:
            return None
        err = self.error()
        with np.errstate(all="ignore"):
            if self.tol is not None:
                score = err / np.maximum(np.broadcast_to(self.tol, err.shape), 1e-300)
            else:
                score = err.copy()
        score = np.where(np.isnan(score), np.inf, score)
        score = np.where(self.ok, -1.0, score) if not self.passed else score
        flat = int(np.argmax(score))
        return tuple(int(i) for i in np.unravel_index(flat, np.shape(score)))

    def stats(self) -> dict:
        err = self.error()
        finite = np.isfinite(err)
        with np.errstate(all="ignore"):
            rel = err / np.abs(self.ref)
        rel = rel[finite & np.isfinite(rel)]
        idx = self.worst_index()
        d = {"mismatched": self.mismatched, "total": self.total,
             "max_abs": float(np.max(err[finite])) if finite.any() else float("nan"),
             "max_rel": float(np.max(rel)) if rel.size else float("nan"), "index": idx}
        if idx is not None:
            d["actual"] = float(self.out[idx])
            d["expected"] = float(self.ref[idx])
            d["measured"] = float(err[idx])
            if self.tol is not None:
                d["allowed"] = float(np.broadcast_to(self.tol, err.shape)[idx])
        return d


#: the verdict code of each way a call can fail
FAILURE_CODES = {"raised": "kernel.raised", "crashed": "kernel.crashed",
                 "timeout": "kernel.timeout", "bad-output": "kernel.bad-output",
                 "tampered": "integrity.transport"}


def check_flags(res: CallResult, case: Optional[Case]) -> None:
    """Raise :class:`KernelFailure` for the first integrity flag of a call (an input
    mutated, an aliased output, process state changed, ...)."""
    for flag in res.flags:
        kind, _, what = flag.partition(":")
        if kind in INTEGRITY_MESSAGES:
            raise KernelFailure(f"integrity.{kind}", INTEGRITY_MESSAGES[kind].format(what), case)


def raise_for_failure(res: CallResult, case: Optional[Case]) -> None:
    """A call that failed (raised, crashed, hung, returned no array, tampered with the
    channel) or broke an integrity rule, as a :class:`KernelFailure`."""
    if not res.ok:
        raise KernelFailure(FAILURE_CODES.get(res.status, f"kernel.{res.status}"),
                            res.describe(), case)
    check_flags(res, case)


def validated_output(res: CallResult, shape: tuple, dtype: np.dtype,
                     case: Optional[Case], who: str = "the kernel") -> np.ndarray:
    """The output of a call as the parent sees it, checked before any comparison: a plain
    ``numpy.ndarray`` (no subclass), of exactly ``shape`` and ``dtype`` (byte order and
    all: ``>f4`` is not ``float32``), with as many elements as the shape says.  What the
    worker reports about its output (``meta``) is never believed; nothing is broadcast."""
    out = res.out
    if type(out) is not np.ndarray:
        raise KernelFailure("kernel.bad-output", f"{who} returned a {type(out).__name__}, "
                            "not a plain array", case)
    want = tuple(int(d) for d in shape)
    if tuple(out.shape) != want:
        raise KernelFailure("kernel.wrong-shape",
                            f"{who} returned shape {tuple(out.shape)}, expected {want}", case)
    want_dtype = np.dtype(dtype)
    if out.dtype != want_dtype or out.dtype.str != want_dtype.str or out.dtype.fields:
        raise KernelFailure("kernel.wrong-dtype", f"{who} returned dtype {out.dtype.str} "
                            f"({out.dtype.name}), expected {want_dtype.name} "
                            f"({want_dtype.str})", case)
    if out.size != int(np.prod(want, dtype=np.int64)) or out.nbytes != out.size * want_dtype.itemsize:
        raise KernelFailure("kernel.wrong-shape", f"{who} returned {out.size} elements for "
                            f"shape {want}", case)
    # the parent's own contiguous copy: nothing shared with a buffer the reply came in
    return np.array(out, dtype=want_dtype, order="C", copy=True)


def make_violation(cmp: Optional[Comparison], *, contract_id: str, contract_class: str,
                   code: str, message: str, reproduce: str,
                   quantities: Optional[Mapping[str, Any]] = None,
                   case: Optional[Case] = None) -> Violation:
    """A :class:`~.verdict.Violation` from the comparison that shows it (its worst
    element: index, actual, expected, measured and allowed error)."""
    st = cmp.stats() if cmp is not None else {}
    c = case or (cmp.case if cmp is not None else None)
    return Violation(
        contract_id=contract_id, contract_class=contract_class, case=c, code=code,
        message=message, mismatched=st.get("mismatched", 0), total=st.get("total", 0),
        index=st.get("index"), actual=st.get("actual"), expected=st.get("expected"),
        max_abs=st.get("max_abs"), max_rel=st.get("max_rel"), allowed=st.get("allowed"),
        measured=st.get("measured"), quantities=dict(quantities or {}), reproduce=reproduce)


class Measurement:
    """What every measurement keeps while it runs, whichever way its cases are drawn: the
    cases run, the time spent in the kernel (as timed inside its worker), in the call round
    trip and in the oracle, and the range of the tolerances the cases were held to.
    :class:`Context` (the suite's protocols) and the KernelBench check stand on it."""

    def __init__(self, progress: Optional[Callable[[], None]] = None):
        self.progress = progress or (lambda: None)
        self.cases = 0
        self.tol_range = [np.inf, -np.inf]
        #: seconds spent in the kernel (as timed inside the worker), the call round
        #: trip (transfer + worker), and the oracle; the rest is the checker's own
        self.timings = {"kernel": 0.0, "call": 0.0, "oracle": 0.0}

    def timed_call(self, request: Callable[[], CallResult]) -> CallResult:
        """One call of the kernel (``request()``), counted and timed."""
        t0 = time.perf_counter()
        res = request()
        self.timings["call"] += time.perf_counter() - t0
        self.timings["kernel"] += float(res.seconds or 0.0)
        self.cases += 1
        self.progress()
        return res

    def note_tolerance(self, tol) -> None:
        """Widen the range of tolerances the cases were held to."""
        if tol is None:
            return
        t = np.asarray(tol, dtype=np.float64)
        finite = t[np.isfinite(t)]
        if finite.size:
            self.tol_range[0] = min(self.tol_range[0], float(np.min(finite)))
            self.tol_range[1] = max(self.tol_range[1], float(np.max(finite)))

    def ranged(self, text: str) -> str:
        """A tolerance's formula with the range of its values over the cases run."""
        lo, hi = self.tol_range
        if np.isfinite(lo):
            text += f"  [{lo:.3g} .. {hi:.3g} over the cases run]"
        return text


class Context(Measurement):
    """Everything a protocol needs, bound to one contract and one kernel."""

    def __init__(self, contract: Contract, op: Op, dtype: Format, claims: Claims, kernel,
                 *, framework: str = "numpy", device: str = "cpu", seed: int = 0,
                 reproduce: str = "", progress: Optional[Callable[[], None]] = None,
                 max_cases: Optional[int] = None, protocol_spec=None, detector=None,
                 oracle: Optional[Callable] = None, memo: Optional[dict] = None):
        self.contract = contract
        #: what one check run's contracts share (the runner passes one dict to each of
        #: them): results of deterministic probes of the same kernel, computed once
        self.memo = {} if memo is None else memo
        #: resolved by the runner: the protocol's declaration (parameter defaults), the
        #: signature detector (None: the contract names none) and the contract's oracle,
        #: ``oracle(ctx, x, kwargs) -> float64 reference`` (None: the op's own)
        self.protocol_spec = protocol_spec
        self.detector = detector
        self.oracle = oracle
        self.op = op
        self.dtype = dtype
        self.claims = claims
        self.kernel = kernel
        self.framework = framework
        self.device = device
        self.user_seed = seed
        self.reproduce = reproduce
        super().__init__(progress)
        self.max_cases = max_cases
        self.kernel_info = getattr(kernel, "info", {}) or {}

    # -- parameters -----------------------------------------------------------------
    @property
    def protocol(self):
        return self.contract.protocol

    def param(self, name: str, default: Any = None) -> Any:
        params = self.protocol.params or {}
        if name in params:
            return params[name]
        spec = self.protocol_spec
        if spec is not None and name in spec.params:
            return spec.params[name][1]
        return default

    def shapes(self) -> list[dict]:
        shapes = self.protocol.shapes or (self.op.basic_shape,)
        return [self.op.full_shape(s) for s in shapes]

    def kwargs(self) -> dict:
        kw = self.op.call_kwargs(self.dtype)
        kw.update(self.param("kwargs", {}) or {})
        return kw

    def rng(self, *keys) -> np.random.Generator:
        words = [int(self.protocol.seed), int(self.user_seed),
                 zlib.crc32(self.contract.id.encode())]
        for k in keys:
            words.append(k if isinstance(k, int) else zlib.crc32(str(k).encode()))
        return np.random.default_rng(words)

    # -- inputs ---------------------------------------------------------------------
    def case(self, shape: Mapping[str, int], family: str, trial: int = 0, **extra) -> Case:
        return Case(shape=dict(shape), dtype=self.dtype.name,
                    seed=int(self.protocol.seed) + int(self.user_seed), family=family,
                    trial=trial, extra=extra)

    def inputs(self, shape: Mapping[str, int], family: str, trial: int = 0,
               *keys) -> dict[str, np.ndarray]:
        supplied = (self.protocol.params or {}).get("supplied_inputs") or {}
        if family in supplied:  # inputs that come with the contract (a model's recorded ones)
            return {k: np.array(v) for k, v in supplied[family].items()}
        rng = self.rng(self.op.describe_shape(shape), family, trial, *keys)
        return self.op.generate(shape, self.dtype, family, rng)

    def iter_cases(self):
        """(case, inputs) over the protocol's shapes x families x trials."""
        for shape in self.shapes():
            for family in self.protocol.families:
                for trial in range(self.protocol.trials):
                    yield self.case(shape, family, trial), self.inputs(shape, family, trial)

    # -- calling the kernel ---------------------------------------------------------
    def call(self, inputs: Mapping[str, np.ndarray], kwargs: Optional[dict] = None, *,
             layout: Optional[str] = None) -> CallResult:
        """Call the kernel; failures come back as data.  ``layout``: give the kernel its
        inputs in that memory layout (``transposed``, ``strided``; the same values)."""
        args = [inputs[name] for name in self.op.inputs]
        kw = self.kwargs() if kwargs is None else kwargs
        kw = self._accepted(kw)
        return self.timed_call(lambda: self.kernel.call(args, kw, layout=layout))

    def _accepted(self, kw: dict) -> dict:
        accepts = self.kernel_info.get("accepts")
        if accepts is None or self.kernel_info.get("var_kw"):
            return kw
        return {k: v for k, v in kw.items() if k in accepts}

    def run(self, inputs: Mapping[str, np.ndarray], case: Case,
            kwargs: Optional[dict] = None, *, out_shape: Optional[tuple] = None,
            layout: Optional[str] = None) -> np.ndarray:
        """Call the kernel and validate its output; failures raise :class:`KernelFailure`."""
        res = self.call(inputs, kwargs, layout=layout)
        return self.validate(res, case, inputs, out_shape=out_shape)

    def run_in_fresh_process(self, inputs: Mapping[str, np.ndarray], case: Case,
                             kwargs: Optional[dict] = None) -> np.ndarray:
        """:meth:`run` in a second, fresh worker (another process, another
        ``PYTHONHASHSEED``) where the kernel runs isolated; the same worker otherwise.
        Run-to-run determinism must hold across processes, not only within one."""
        from .sandbox import KernelProcess
        if not isinstance(self.kernel, KernelProcess):
            return self.run(inputs, case, kwargs)
        args = [inputs[name] for name in self.op.inputs]
        kw = self._accepted(self.kwargs() if kwargs is None else kwargs)
        try:
            res = self.timed_call(lambda: self.kernel.sibling().call(args, kw))
        except Exception as exc:  # the second worker does not load: the kernel's failure
            raise KernelFailure("kernel.load", f"a second worker could not load the kernel: "
                                f"{exc}", case) from None
        return self.validate(res, case, inputs)

    def validate(self, res: CallResult, case: Case, inputs: Mapping[str, np.ndarray],
                 *, out_shape: Optional[tuple] = None) -> np.ndarray:
        raise_for_failure(res, case)
        want_shape = tuple(out_shape) if out_shape is not None else self._out_shape(inputs)
        return validated_output(res, want_shape, self.op.output_format(self.dtype).dtype, case)

    def check_flags(self, res: CallResult, case: Case) -> None:
        check_flags(res, case)

    def _out_shape(self, inputs):
        return tuple(self.op.output_shape(self.op.solve_shape(inputs)))

    # -- oracle and comparison ---------------------------------------------------------
    def reference(self, inputs: Mapping[str, np.ndarray], kwargs: Optional[dict] = None):
        t0 = time.perf_counter()
        x = upcast(inputs)
        kw = self.kwargs() if kwargs is None else kwargs
        ref = declared_claims.reference(self, x, kw)  # the contract's oracle, under the declared claims
        self.timings["oracle"] += time.perf_counter() - t0
        return ref, x

    def env(self, x: Mapping[str, np.ndarray], out: np.ndarray, ref: np.ndarray,
            shape: Mapping[str, int], extra: Optional[Mapping[str, Any]] = None,
            kwargs: Optional[dict] = None) -> dict:
        kw = self.kwargs() if kwargs is None else kwargs
        env: dict[str, Any] = {"out": np.asarray(out, dtype=np.float64) if out is not None else None,
                               "ref": ref, "dtype": self.op.output_format(self.dtype),
                               "n": self.op.reduction_length(shape)}
        env.update({k: v for k, v in x.items()})
        env.update({k: int(v) for k, v in shape.items()})
        for key, value in self.claims.as_dict().items():
            env[key] = self.claims.get(key)
        env.update(self.op.tolerance_quantities(x, ref, **kw))
        if extra:
            env.update(extra)
        return env

    def evaluate(self, case: Case, inputs: Mapping[str, np.ndarray], out: np.ndarray,
                 ref: Optional[np.ndarray] = None, *, extra: Optional[Mapping[str, Any]] = None,
                 kwargs: Optional[dict] = None, x: Optional[Mapping[str, np.ndarray]] = None,
                 ) -> Comparison:
        if ref is None:
            ref, x = self.reference(inputs, kwargs)
        elif x is None:
            x = upcast(inputs)
        env = self.env(x, out, ref, case.shape, extra, kwargs)
        with np.errstate(all="ignore"):
            tol = None
            for name, expr in self.contract.tolerance.items():
                env[name] = expr.evaluate(env)
                tol = env[name] if tol is None or name == "tol" else tol
            ok = self.contract.postcondition.evaluate(env)
        out64 = env["out"]
        if out64 is not None and np.shape(ref) != np.shape(out64):
            raise KernelFailure("kernel.wrong-shape", f"the output has shape "
                                f"{np.shape(out64)}, the oracle {np.shape(ref)}", case)
        ok = np.asarray(ok, dtype=bool)
        if ok.shape != np.shape(out64):
            if ok.ndim != 0:
                raise ContractError(f"{self.contract.id}: the postcondition has shape "
                                    f"{ok.shape}, the output {np.shape(out64)}")
            ok = np.full(np.shape(out64), bool(ok))  # a scalar verdict holds for every element
        ok = declared_claims.honour_flush(self, ok, out64, ref)
        self.note_tolerance(tol)
        return Comparison(case=case, ok=ok, out=out64, ref=np.asarray(ref, dtype=np.float64),
                          tol=None if tol is None else np.asarray(tol, dtype=np.float64), env=env)

    def precondition_holds(self, case: Case, inputs, ref=None, x=None) -> bool:
        pre = self.contract.precondition
        if pre is None:
            return True
        if ref is None:
            ref, x = self.reference(inputs)
        env = self.env(x if x is not None else upcast(inputs), None, ref, case.shape)
        with np.errstate(all="ignore"):
            return bool(np.all(pre.evaluate(env)))

    # -- results ------------------------------------------------------------------------
    def tolerance_text(self) -> str:
        parts = [f"{k} = {e.source}" for k, e in self.contract.tolerance.items()]
        return self.ranged("; ".join(parts))

    def reproduce_line(self, case: Optional[Case] = None) -> str:
        return self.reproduce

    def violation(self, cmp: Optional[Comparison], *, code: Optional[str] = None,
                  message: str = "", quantities: Optional[Mapping[str, Any]] = None,
                  case: Optional[Case] = None) -> Violation:
        c = case or (cmp.case if cmp is not None else None)
        return make_violation(
            cmp, contract_id=self.contract.id, contract_class=self.contract.cls,
            code=code or f"{self.contract.cls}.{self.contract.signature.code}",
            message=message or self.contract.signature.summary, quantities=quantities,
            case=c, reproduce=self.reproduce_line(c))

    def result(self, status: Status, *, message: str = "", violation: Optional[Violation] = None,
               signature: Optional[Mapping[str, Any]] = None, details: Optional[Mapping] = None,
               seconds: float = 0.0) -> ContractResult:
        sig = dict(signature or {})
        if violation is not None:
            sig.setdefault("code", violation.code)
            for k, v in violation.quantities.items():
                sig.setdefault(k, v)
        return ContractResult(contract=self.contract.cls, id=self.contract.id, verdict=status,
                              message=message, tolerance=self.tolerance_text(),
                              violation=violation, signature=sig, cases=self.cases,
                              seconds=seconds, reproduce=self.reproduce,
                              details=dict(details or {}))

    def passed(self, message: str = "", **kw) -> ContractResult:
        return self.result(Status.PASS, message=message or f"{self.cases} cases conform", **kw)

    def violated(self, violation: Violation, **kw) -> ContractResult:
        return self.result(Status.VIOLATION, message=violation.message, violation=violation, **kw)

    def skipped(self, why: str) -> ContractResult:
        return self.result(Status.SKIPPED, message=why)

    def run_detector(self, evidence: Mapping[str, Any]) -> Diagnosis:
        """Run the contract's signature detector (resolved by the runner); an empty
        :class:`Diagnosis` when the contract names none."""
        if self.detector is None:
            return Diagnosis()
        return Diagnosis.of(self.detector.run(self, evidence))


class ReferenceKernel:
    """A stand-in kernel that answers every call with the contract's own reference,
    rounded to the output format (or raises where the reference cannot be computed, as on
    out-of-range indices): the best-behaved kernel there is.  Used to tell a failure of
    the checker from a failure the kernel's values cause (:func:`blame`)."""

    def __init__(self, op: Op, dtype: Format):
        self.op, self.dtype = op, dtype
        self.ctx: Optional[Context] = None
        self.info: dict = {}

    def call(self, args, kwargs=None, **_) -> CallResult:
        try:
            ref, _x = self.ctx.reference(dict(zip(self.op.inputs, args)), dict(kwargs or {}))
            with np.errstate(all="ignore"):
                out = np.asarray(ref).astype(self.op.output_format(self.dtype).dtype)
        except Exception as exc:
            return CallResult(status="raised", error=str(exc), error_type=type(exc).__name__)
        return CallResult(status="ok", out=out)


def blame(run_protocol: Callable[[Any], Any], make_context: Callable[[Any], Context],
          op: Op, dtype: Format) -> bool:
    """Whether a protocol that raised while judging a kernel failed because of the
    kernel's values: True when the same protocol, run with :class:`ReferenceKernel` as the
    kernel (``make_context(kernel)`` builds its context), completes (any verdict).  When it
    fails there too, the checker is at fault."""
    kernel = ReferenceKernel(op, dtype)
    try:
        ctx = kernel.ctx = make_context(kernel)
        with np.errstate(all="ignore"):
            run_protocol(ctx)
    except KernelFailure:
        return True
    except Exception:
        return False
    return True


def reproduce_command(kernel: str, op: str, dtype: str, framework: str, device: str,
                      contract_cls: str, seed: int, declared: Mapping[str, Any]) -> str:
    parts = ["kcontract", "check", kernel, "--op", op, "--dtype", dtype]
    if framework != "numpy":
        parts += ["--framework", framework]
    if device not in ("cpu", ""):
        parts += ["--device", device]
    parts += ["--contract", contract_cls]
    if seed:
        parts += ["--seed", str(seed)]
    for k, v in declared.items():
        parts += ["--declare", f"{k}={v}"]
    return " ".join(shlex.quote(p) for p in parts)
