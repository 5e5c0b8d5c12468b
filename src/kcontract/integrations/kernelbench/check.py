"""KernelBench-format problems: check a candidate ``ModelNew`` against its ``Model``.

A KernelBench problem file defines ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``; a candidate file defines ``class ModelNew`` with the same
constructor and ``forward``.  Problems are arbitrary modules, not the suite's
registered ops, so this module checks them on a generic path, with the contract
classes that apply to any module:

``C-PRC-01`` precision at the benchmarked shape (the problem's own inputs and the
    signed families ``rand``, ``uniform``, ``normal``) against the float64 oracle;
``C-PRC-02`` the same on large-offset and large-magnitude inputs (cancellation,
    overflow): failures there while small inputs pass;
``C-CMP-03`` shape polymorphism and freshness: the problem's module-level size
    constants rescaled (primes, one past, tiny) where the reference accepts them,
    repeated calls with fresh inputs back to back (cached or stale results), and
    both run orders (the reference run first in the candidate's process, as
    KernelBench does, against the candidate alone);
``C-ORD-02`` run-to-run determinism (when declared; the default on the CPU);
``C-EXC-01`` NaN and Inf injected into the inputs appear in the output exactly where
    the float64 reference puts them.

Both models run in eval mode (dropout off), or both in training mode (``--train``) with
every forward pass seeded alike on both sides from its inputs (the same dropout masks for
an honest candidate).  ``--scale`` / ``--max-elements`` shrink
the problem's sizes first (:mod:`.scale`).

The oracle is the reference ``Model`` run in float64 here, with the weights the
candidate gets (the reference's, rounded to the dtype).  The candidate runs in
an isolated worker (:mod:`.worker`) that never holds the
oracle; every call gets fresh inputs and is checked for tampering (see
``docs/threat-model.md``).

Tolerance (derived, never measured off the candidate), per output element i::

    tol_i = max( kappa * (pgamma(n, u_acc) + s * u) * mag_i + kappa * s * sens_i + ulp(ref_i),
                 2 * |r_i - ref_i| )

``sens_i``: the measured sensitivity of the float64 reference, ``|ref(x o (1 + u r)) -
ref(x)|`` for random signs ``r`` (its conditioning at these inputs: large for a
normalisation of offset inputs, where the verdict says the inputs are ill-conditioned);

``n`` (reduction length): the largest number of elements of one input or weight
that an output element depends on, read off the float64 reference's Jacobian
(autograd) at up to three output elements, on absolute-valued inputs and weights
(so no ReLU hides a dependence); ``s`` (rounding stages): the number of operations
in the reference's autograd graph, each of which may round its result to the
dtype (unit roundoff ``u``), and at least 4 (a fused op of the reference, such as
softmax, is several rounded stages in an honest unfused candidate); ``u_acc``: the declared accumulator (default float32);
``pgamma``: Higham and Mary's probabilistic bound (failure probability 1e-9 per
element); ``mag_i = max(|ref_i|, |ref_abs_i|, mean |ref|)`` with ``ref_abs`` the
float64 reference on absolute-valued inputs and weights (the magnitude an inner
product's error scales with, |a|.|b|, not its possibly cancelled value);
``kappa = 4`` covers the conditioning of the module's nonlinear stages; ``r`` is
the trusted reference itself run at the dtype (its own rounding error, doubled:
no candidate is held to a stricter standard than the reference meets).
"""
from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from ... import __version__
from ...adapters.base import Adapter
from ...check.engine import (FAILURE_CODES, Comparison, KernelFailure, Measurement,
                              make_violation, raise_for_failure, validated_output)
from ...check.sandbox import CallResult, KernelLoadError, KernelProcess, output_digest
from ...check.seeds import derive_seed
from ...check.verdict import Case, ContractResult, RunResult, Status, Violation, jsonable
from ...language.claims import make_claims
from ...classes.common import worst
from ...classes.ordering import bits_differ, diff_pattern
from ...errors import UsageError
from ...formats import get_format
from .problem_op import (DTYPES, CaseInputs, Oracle, Problem, ProblemOp, _is_float_array,
                         _to_plain, _torch, call_seed, inject_exceptional, inputs_digest, load_problem,
                         make_inputs, shape_variants, storage_dtype, zlib_crc)
from .scale import Scaling

#: KernelBench's documented allclose tolerances (atol = rtol) per precision
KERNELBENCH_TOLERANCE = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}
KERNELBENCH_TRIALS = 5
KERNELBENCH_SEED = 42
#: the generic classes, in the order they run (C-CMP-03 last: its order step loads
#: the reference into the candidate's process)
MODULE_CLASSES = ("C-PRC-01", "C-PRC-02", "C-ORD-02", "C-EXC-01", "C-CMP-03")
PRECISION_FAMILIES = ("problem", "rand", "uniform", "normal")
DOMAIN_FAMILIES = ("offset", "large")
SWEEP_FAMILIES = ("problem", "normal")
FRESH_CALLS = 4
#: a measured sensitivity (in units of u times the output's magnitude) from which the
#: inputs count as ill-conditioned for the module, and the verdict says so
ILL_CONDITIONED = 64.0
#: the kcontract package's folder: frames there are the checker's own
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# -- the candidate's process -------------------------------------------------------------
class ModelProcess(KernelProcess):
    """A candidate ``ModelNew`` in its own worker; rebuilt after any restart."""

    worker_module = "kcontract.integrations.kernelbench.worker"

    def __init__(self, candidate: str, *, dtype: str, device: str = "cpu",
                 timeout: float = 60.0, train: bool = False, **options):
        """``candidate``: the candidate's file (or a ``file:ModelNew`` spec); ``options``:
        :class:`KernelProcess`'s own (``load_timeout``, ``sandbox``, ``decoys``...)."""
        kernel = candidate if candidate.endswith(":ModelNew") else \
            f"{os.path.abspath(candidate)}:ModelNew"
        super().__init__(kernel, framework="torch", device=device, timeout=timeout, **options)
        self.dtype = dtype
        self.train = train
        self._build: Optional[dict] = None
        self.built: dict = {}
        self._reply: dict = {}

    def load_payload(self) -> dict:
        d = super().load_payload()
        d["dtype"] = self.dtype
        return d

    def start(self) -> dict:
        info = super().start()
        if self._build is not None:
            self._send_build()
        return info

    def build(self, init_inputs: list, state: Optional[dict], seed: int) -> dict:
        return self.build_from({"init_inputs": [_to_plain(v) for v in init_inputs],
                                "state": state, "seed": seed, "train": self.train})

    def build_from(self, build: dict) -> dict:
        self._build = dict(build)
        if self.ensure_alive():  # a fresh worker builds as it starts
            return self.built
        return self._send_build()

    def _send_build(self) -> dict:
        res = self.request("build", self._build, self.load_timeout)
        if not res.ok:
            raise KernelFailure(FAILURE_CODES.get(res.status, f"kernel.{res.status}"),
                                "ModelNew(*get_init_inputs()) failed: " + res.describe())
        self.built = self._reply
        return self.built

    def raw(self, verb: str, payload: dict, timeout: Optional[float] = None):
        """One request, its reply as (status, payload)."""
        res = self.request(verb, payload, timeout)
        return res.status, (self._reply if res.ok else {"message": res.error,
                                                        "type": res.error_type})

    def _request(self, msg, timeout: float):
        # the last reply's payload as sent (a CallResult keeps a call's fields only): what
        # `build` and `kernelbench` answer
        status, payload = super()._request(msg, timeout)
        self._reply = payload if isinstance(payload, dict) else {}
        return status, payload

    def sibling(self) -> "ModelProcess":
        """A second worker for the same candidate (its own process and hash seed), built as
        this one was (see :meth:`KernelProcess.sibling`)."""
        if self._sibling is None:
            self._sibling = type(self)(self.kernel, dtype=self.dtype, device=self.device,
                                       timeout=self.timeout, train=self.train,
                                       load_timeout=self.load_timeout, paths=self.paths,
                                       sandbox=self.sandbox, decoys=self.decoys)
        if self._build is not None and self._sibling._build != self._build:
            self._sibling.build_from(self._build)
        return self._sibling


# -- the check -----------------------------------------------------------------------------
@dataclass
class KernelBenchRun:
    """A candidate's verdicts on the generic classes, and KernelBench's own verdict."""

    reference: str
    candidate: str
    problem: str
    dtype: str
    device: str
    seed: int
    run: RunResult
    kernelbench: dict = field(default_factory=dict)
    variants: list = field(default_factory=list)
    allowance: dict = field(default_factory=dict)
    #: the sizes the check ran at (reduced by ``--scale`` / ``--max-elements``, or not)
    scaling: Scaling = field(default_factory=Scaling)
    #: the models' mode: ``eval`` (the default) or ``train`` (``--train``, aligned RNG)
    mode: str = "eval"

    @property
    def verdict(self) -> str:
        return self.run.verdict

    @property
    def failing(self) -> list[str]:
        """Class IDs that were violated, and the codes of errors (``integrity.*``,
        ``kernel.*``), each once, in the order they were found."""
        out = []
        for r in self.run.results:
            if r.verdict == Status.VIOLATION:
                item = r.contract
            elif r.verdict == Status.ERROR:
                item = (r.signature or {}).get("code") or r.contract
            else:
                continue
            if item not in out:
                out.append(item)
        return out

    def to_json(self) -> dict:
        return {"schema": "kcontract.kernelbench/1", "reference": self.reference,
                "candidate": self.candidate, "problem": self.problem, "dtype": self.dtype,
                "device": self.device, "seed": self.seed, "verdict": self.verdict,
                "failing": self.failing, "kernelbench": jsonable(self.kernelbench),
                "variants": jsonable(self.variants), "allowance": jsonable(self.allowance),
                "scale": jsonable(self.scaling.as_dict()), "mode": self.mode,
                "run": self.run.to_json()}


@dataclass
class CaseSummary:
    """What is kept of one measured case once it is compared: its verdict and the
    statistics of its worst element (what a violation reports), not its arrays.  The
    check streams its cases: memory holds one case's arrays at a time, however many run."""

    case: Case
    passed: bool
    mismatched: int
    total: int
    summary: dict
    #: elements NaN where the oracle is finite (an output left unwritten)
    uninitialised: int = 0

    @classmethod
    def of(cls, cmp: "Comparison | CaseSummary") -> "CaseSummary":
        if isinstance(cmp, CaseSummary):
            return cmp
        return cls(case=cmp.case, passed=cmp.passed, mismatched=cmp.mismatched,
                   total=cmp.total, summary=cmp.stats(), uninitialised=_nan_where_finite(cmp))

    def stats(self) -> dict:
        return dict(self.summary)


class ModuleCheck(Measurement):
    """The generic protocols for one (problem, candidate) pair, on the check engine
    (:class:`~kcontract.check.engine.Measurement`: call accounting, output validation,
    tolerance ranges and violations)."""

    def __init__(self, problem: Problem, handle: ModelProcess, dtype: str, seed: int, claims,
                 reproduce: str, progress: Optional[Callable[[], None]] = None,
                 train: bool = False):
        super().__init__(progress)
        self.problem, self.handle, self.dtype, self.seed = problem, handle, dtype, seed
        self.train = train
        # separate seeds, one-way derived: what the candidate can read back from its own
        # process (torch.initial_seed() after the build) tells it nothing of the inputs
        self.build_seed = derive_seed(seed, "build")
        self.input_seed = derive_seed(seed, "inputs")
        self.fmt = get_format(dtype)
        self.claims = claims
        self.u_acc = claims.accumulate.u
        self.reproduce = reproduce
        #: the problem as an op: its inputs, its shapes and its float64 oracle per shape
        self.op = ProblemOp.of(problem, dtype, self.build_seed, train, self.input_seed)
        self.oracles = self.op.oracles
        self.variants: list[dict] = []
        self.current: Optional[str] = None
        #: (output digest, input digest, CaseSummary) of every measured call, for stale
        #: outputs: digests and summaries only, never the arrays
        self.history: list = []

    # -- shapes -------------------------------------------------------------------------
    def prepare_variants(self) -> list[tuple[str, dict]]:
        usable = []
        todo = list(self.op.variants())
        while todo:
            label, over = todo.pop(0)
            try:
                orc = self.oracle(label, over)
                args = orc.take_first_inputs() or self.op.args(over, "problem", self.input_seed)
                ref = orc.reference(args)
                if label != "basic" and not np.all(np.isfinite(ref)):
                    raise ValueError("the reference gives non-finite values")
                usable.append((label, over))
                self.variants.append({"label": label, "constants": dict(over), "used": True})
            except KernelFailure:
                raise
            except Exception as exc:
                if out_of_memory(exc):
                    raise  # the checker's own limit, not the reference rejecting a shape
                if label == "basic":
                    raise UsageError(f"the reference problem does not run: "
                                     f"{type(exc).__name__}: {exc}") from exc
                self.op.forget(label)
                self.variants.append({"label": label, "constants": dict(over), "used": False,
                                      "why": f"the reference rejects it ({type(exc).__name__}: "
                                             f"{str(exc)[:120]})"})
                kind, _, names = label.partition(":")
                if "+" in names:
                    # sizes that share a value but not a role (channels and an image side):
                    # the group rescaled together breaks a divisibility, so each one alone
                    todo.extend((f"{kind}:{k}", {k: v}) for k, v in over.items())
        return usable

    def oracle(self, label: str, over: Mapping[str, int]) -> Oracle:
        return self.op.oracle_at(label, over)

    def use(self, label: str, over: Mapping[str, int]) -> Oracle:
        orc = self.oracle(label, over)
        if self.current != label:
            self.handle.build(orc.init, orc.state, self.build_seed)
            self.current = label
        return orc

    # -- one case ------------------------------------------------------------------------
    def case(self, label: str, over: Mapping[str, int], family: str, trial: int, **extra) -> Case:
        shape = dict(self.problem.constants)
        shape.update(over)
        return Case(shape=shape, dtype=self.dtype, seed=self.seed, family=family, trial=trial,
                    extra={"shape": label, **extra})

    def inputs(self, over, family: str, trial: int, salt: str = "") -> list:
        """One case's inputs, in ``get_inputs()`` order: the op's own generator
        (:meth:`ProblemOp.generate`) under this case's seed."""
        rng = np.random.default_rng([self.input_seed, trial, zlib_crc(family + salt)])
        x = self.op.generate({**self.problem.constants, **over}, self.fmt, family, rng)
        return CaseInputs(x[k] for k in self.op.inputs)

    def call(self, args: list, case: Case, layout: str = "", handle=None) -> CallResult:
        """One call of the candidate through the sandbox's call (decoys, the input arena,
        the FP-register read); ``handle``: another worker (the sibling) than the main one."""
        handle = handle or self.handle
        # in training mode, the seed the reference's forward pass on these inputs runs under
        extra = {"rng_seed": call_seed(args)} if self.train else None
        return self.timed_call(lambda: handle.call(args, {}, layout=layout or None,
                                                   extra=extra))

    def validate(self, res: CallResult, case: Case, ref: np.ndarray) -> np.ndarray:
        raise_for_failure(res, case)
        orc = self.oracles.get(case.extra.get("shape"))
        want = orc.out_dtype if orc is not None and orc.out_dtype else self.dtype
        return validated_output(res, tuple(np.shape(ref)), storage_dtype(want), case,
                                who="ModelNew")

    def measure(self, label: str, over, family: str, trial: int, *, args=None,
                salt: str = "", layout: str = "") -> Optional[tuple[CaseSummary, np.ndarray]]:
        """Run one case; None when it lies outside the problem's domain at this dtype
        (the reference at the dtype is non-finite where the oracle is finite, or the
        oracle is non-finite on finite inputs).  ``layout``: the candidate gets its inputs
        as non-contiguous views (transposed, strided) holding the same values."""
        orc = self.use(label, over)
        case = self.case(label, over, family, trial, **({"layout": layout} if layout else {}))
        args = CaseInputs(args) if args is not None else self.inputs(over, family, trial, salt)
        t0 = time.perf_counter()
        ref = orc.reference(args)
        low = orc.at_dtype(args)
        self.timings["oracle"] += time.perf_counter() - t0
        if not _in_domain(args, ref, low):
            return None
        out = self.validate(self.call(args, case, layout), case, ref)
        cmp = self.compare(orc, case, args, out, ref, low)
        return self.remember(args, out, cmp), out

    def remember(self, args, out, cmp: Comparison) -> CaseSummary:
        """Every measured call's output and input digests, and the summary of its
        comparison (what is kept of it): a failing output that an earlier call on other
        inputs returned is a stale one."""
        summary = CaseSummary.of(cmp)
        self.history.append((output_digest(out), inputs_digest(args), summary))
        return summary

    def stale(self, since: int = 0) -> Optional[tuple[CaseSummary, CaseSummary]]:
        """(a failing comparison from ``since`` on, the earlier one whose output it repeats).
        Only a repeat of an output that was right for its own inputs is stale (a cached or
        replayed result); the same wrong output for different inputs (zeros where a shape
        drops all the work) is that shape's failure, not a replay."""
        for i in range(max(since, 1), len(self.history)):
            dig, idig, cmp = self.history[i]
            if cmp.passed:
                continue
            for pdig, pidig, prev in self.history[:i]:
                if pdig == dig and pidig != idig and prev.passed:
                    return cmp, prev
        return None

    def compare(self, orc: Oracle, case: Case, args, out, ref, low) -> Comparison:
        ref64 = np.asarray(ref, dtype=np.float64)
        out64 = np.asarray(out, dtype=np.float64)
        if np.asarray(ref).dtype.kind in "iub":
            ok = out64 == ref64
            return Comparison(case=case, ok=ok, out=out64, ref=ref64, tol=None)
        tol = orc.tolerance(args, ref64, low, self.u_acc)
        with np.errstate(all="ignore"):
            ok = (np.abs(out64 - ref64) <= tol) | (
                ~np.isfinite(ref64) & _same_exceptional(out64, ref64))
        self.note_tolerance(tol)
        return Comparison(case=case, ok=ok, out=out64, ref=ref64, tol=tol)

    # -- results -------------------------------------------------------------------------
    def tolerance_text(self, cls: str) -> str:
        a = self.oracles.get("basic")
        al = a.allowance if a is not None else None
        text = ("max(kappa*(pgamma(n, u_acc) + s*u)*mag + kappa*s*sens + ulp(ref), "
                "2*|reference at dtype - ref|), sens = |ref(x o (1 +- u)) - ref(x)| measured")
        if al is not None:
            text += (f" with n={al.n} ({al.method}), s={al.stages}, u={al.u:.3g}, "
                     f"u_acc={al.u_acc:.3g}, kappa={al.kappa:g}")
        text = self.ranged(text)
        return text if cls not in ("C-ORD-02", "C-EXC-01") else (
            "bitwise identical" if cls == "C-ORD-02" else "NaN/+Inf/-Inf exactly where the oracle has them")

    def result(self, cls: str, status: Status, message: str, *, cmp: Optional[Comparison] = None,
               code: Optional[str] = None, quantities: Optional[dict] = None,
               details: Optional[dict] = None, case: Optional[Case] = None,
               t0: float = 0.0, cases: int = 0) -> ContractResult:
        v = None
        sig = {}
        if status == Status.VIOLATION:
            v = make_violation(cmp, contract_id=result_id(cls), contract_class=cls,
                               code=code or f"{cls}.violated", message=message,
                               quantities=quantities, case=case,
                               reproduce=self.reproduce_of(cls))
            sig = {"code": v.code, **dict(quantities or {})}
        return ContractResult(contract=cls, id=result_id(cls), verdict=status,
                              message=message, tolerance=self.tolerance_text(cls), violation=v,
                              signature=sig, cases=cases, seconds=time.perf_counter() - t0,
                              reproduce=self.reproduce_of(cls), details=dict(details or {}))

    # -- the classes ---------------------------------------------------------------------
    def run_class(self, cls: str) -> ContractResult:
        t0 = time.perf_counter()
        before = self.cases
        self.tol_range = [np.inf, -np.inf]
        for orc in self.oracles.values():
            orc.condition = 0.0
        fn = {"C-PRC-01": self.precision, "C-PRC-02": self.domain, "C-ORD-02": self.determinism,
              "C-EXC-01": self.exceptional, "C-CMP-03": self.polymorphism}[cls]
        try:
            res = fn(cls, t0)
        except KernelFailure as fail:
            res = error_result(cls, fail.code, fail.message, self.reproduce_of(cls),
                               case=fail.case, violation=True, t0=t0)
        except UsageError:
            raise  # the reference itself does not run at its own sizes: not a verdict
        except Exception as exc:  # noqa: BLE001 - the checker's own handling of the problem
            res = self.checker_error(cls, exc, t0)
        return replace(res, cases=self.cases - before)

    def checker_error(self, cls: str, exc: BaseException, t0: float) -> ContractResult:
        """A failure of the checker while it handled the problem's inputs or outputs (an
        input dtype a step does not support, memory exhausted by the oracle): an error
        verdict with a code, so the run and its JSON survive and the other classes run."""
        code = "checker.memory" if out_of_memory(exc) else "checker.problem-io"
        where = ""
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_ROOT):
                where = f" (in {tb.tb_frame.f_code.co_name})"
            tb = tb.tb_next
        message = (f"the checker could not handle this problem's inputs or outputs{where}: "
                   f"{type(exc).__name__}: {str(exc)[:300]}; this is no verdict on the candidate")
        return error_result(cls, code, message, self.reproduce_of(cls), t0=t0)

    def reproduce_of(self, cls: str) -> str:
        return f"{self.reproduce} --contract {cls}"

    def _sweep(self, label, over, families, trials=1, salt: str = ""):
        comps, skipped = [], 0
        for family in families:
            for trial in range(trials):
                got = self.measure(label, over, family, trial, salt=salt)
                if got is None:
                    skipped += 1
                    continue
                comps.append(got[0])  # a summary: the case's arrays are gone with it
        return comps, skipped

    def _verdict(self, cls, t0, comps, skipped, headline, code) -> ContractResult:
        rows = [{"case": c.case.describe(), "passed": c.passed, **{k: v for k, v in c.stats().items()
                 if k in ("mismatched", "total", "max_abs", "measured", "allowed")}} for c in comps]
        if not comps:
            return self.result(cls, Status.SKIPPED, f"no case inside the problem's domain "
                               f"({skipped} skipped)", t0=t0)
        bad = [c for c in comps if not c.passed]
        cond = max((o.condition for o in self.oracles.values()), default=0.0)
        ill = (f"; the inputs are ill-conditioned for this module (measured sensitivity of the "
               f"float64 reference {cond:.3g} u relative to the output's magnitude), which the "
               f"allowance includes" if cond >= ILL_CONDITIONED else "")
        if not bad:
            note = f" ({skipped} outside the problem's domain skipped)" if skipped else ""
            return self.result(cls, Status.PASS, f"{len(comps)} cases conform{note}{ill}", t0=t0,
                               details={"cases": rows, "condition": cond})
        worst_cmp = worst(bad)
        fams = sorted({c.case.family for c in bad})
        return self.result(cls, Status.VIOLATION,
                           f"{headline} ({len(bad)} of {len(comps)} cases fail; families: "
                           f"{', '.join(fams)}{ill + ', so the excess is the kernel' + chr(39) + 's' if ill else ''})",
                           cmp=worst_cmp, code=code,
                           quantities={"failing_families": fams, "failing_cases": len(bad),
                                       "uninitialised": worst_cmp.uninitialised},
                           details={"cases": rows}, t0=t0)

    def precision(self, cls, t0):
        comps, skipped = self._sweep("basic", {}, PRECISION_FAMILIES)
        return self._verdict(cls, t0, comps, skipped,
                             "less accurate than the float64 reference allows at the "
                             "benchmarked shape", "C-PRC-01.inaccurate")

    def domain(self, cls, t0):
        comps, skipped = self._sweep("basic", {}, DOMAIN_FAMILIES)
        return self._verdict(cls, t0, comps, skipped,
                             "fails on large-offset or large-magnitude inputs (cancellation or "
                             "intermediate overflow)", "C-PRC-02.unstable")

    def determinism(self, cls, t0):
        if not self.claims.deterministic:
            return self.result(cls, Status.SKIPPED, "applies only when deterministic=true is "
                               "declared (declared: false)", t0=t0)
        orc = self.use("basic", {})
        args = self.inputs({}, "normal", 0, "determinism")
        ref = orc.reference(args)
        outs = []
        for rep in range(3):
            case = self.case("basic", {}, "normal", 0, repeat=rep)
            # the last repetition in a second worker (another process, another hash seed),
            # as the suite's ordering.repeat does: "deterministic" holds across processes
            handle = self.handle.sibling() if rep == 2 else None
            outs.append(self.validate(self.call(args, case, handle=handle), case, ref))
        for rep in (1, 2):
            a, b = np.asarray(outs[0]), np.asarray(outs[rep])
            diff = bits_differ(a, b)  # bit for bit: -0.0 against 0.0 counts too
            if diff.any():
                case = self.case("basic", {}, "normal", 0, repeat=rep)
                cmp = Comparison(case=case, ok=~diff, out=np.asarray(b, np.float64),
                                 ref=np.asarray(a, np.float64), tol=None)
                return self.result(cls, Status.VIOLATION,
                                   f"identical inputs gave different bits on call {rep + 1} "
                                   f"({int(diff.sum())} of {diff.size} elements differ)",
                                   cmp=cmp, code="C-ORD-02.nondeterministic",
                                   quantities={"differing": int(diff.sum()),
                                               "pattern": diff_pattern(diff)["pattern"]},
                                   t0=t0)
        return self.result(cls, Status.PASS, "3 calls on identical inputs gave identical bits",
                           t0=t0)

    def exceptional(self, cls, t0):
        if self.claims.nan != "propagate":
            return self.result(cls, Status.SKIPPED, f"only nan=propagate is checked on modules "
                               f"(declared: {self.claims.nan})", t0=t0)
        orc = self.use("basic", {})
        checked = changed = 0
        for trial, kinds in enumerate((("nan",), ("inf", "-inf"))):
            base = self.inputs({}, "uniform", trial, "exceptional")
            if not any(_is_float_array(a) for a in base):
                return self.result(cls, Status.SKIPPED, "the problem has no float input", t0=t0)
            args = inject_exceptional(base, kinds, self.input_seed + trial)
            ref = np.asarray(orc.reference(args), dtype=np.float64)
            if np.all(np.isfinite(ref)):
                continue  # the reference absorbs them (a mask, a comparison): nothing to check
            checked += 1
            case = self.case("basic", {}, "uniform+" + "/".join(kinds), trial)
            out = np.asarray(self.validate(self.call(args, case), case, ref), dtype=np.float64)
            # exceptional where the oracle is, finite where it is finite; an Inf that came
            # out as NaN (a BLAS multiplying its zero padding by Inf) is noted, not failed
            ok = np.isfinite(ref) == np.isfinite(out)
            kind_changed = int((~np.isfinite(ref) & ~np.isfinite(out)
                                & ~_same_exceptional(out, ref)).sum())
            if not ok.all():
                cmp = Comparison(case=case, ok=ok, out=out, ref=ref, tol=None)
                lost = int((~np.isfinite(ref) & np.isfinite(out)).sum())
                extra = int((np.isfinite(ref) & ~np.isfinite(out)).sum())
                what = ("exceptional values swallowed: the output is finite where the reference "
                        "propagates " + "/".join(kinds)) if lost else \
                    "exceptional values at positions where the reference has none"
                return self.result(cls, Status.VIOLATION, what, cmp=cmp,
                                   code="C-EXC-01.swallowed" if lost else "C-EXC-01.spurious",
                                   quantities={"swallowed": lost, "spurious": extra,
                                               "kind_changed": kind_changed,
                                               "injected": "/".join(kinds)}, t0=t0)
            changed += kind_changed
        if not checked:
            return self.result(cls, Status.SKIPPED, "the reference never propagates the "
                               "injected values: nothing to compare", t0=t0)
        note = (f" ({changed} elements NaN where the reference has Inf)" if changed else "")
        return self.result(cls, Status.PASS, f"{checked} injected cases propagate as the "
                           f"reference does{note}", t0=t0)

    def polymorphism(self, cls, t0):
        since = len(self.history)
        # 1. fresh results: back-to-back calls with fresh inputs at the benchmarked shape
        fresh: list[CaseSummary] = []
        for trial in range(FRESH_CALLS):
            got = self.measure("basic", {}, "problem", trial, salt="fresh")
            if got is not None:
                fresh.append(got[0])
        # 2. the shape sweep over rescaled constants
        per_variant = {}
        for label, over in self.prepare_variants():
            # inputs of their own: at the benchmarked shape C-PRC-01 already ran the unsalted ones
            comps, _ = self._sweep(label, over, SWEEP_FAMILIES, salt="shapes")
            per_variant[label] = (over, comps)
        # 3. both run orders: the reference first in the candidate's own process
        order = None
        if "basic" in per_variant:
            order = self._orders()
        comps_all = fresh + [c for _, cs in per_variant.values() for c in cs] + [
            c for c in (order or ()) if isinstance(c, CaseSummary)]
        outs = self.history[since:]
        fresh_ids = {id(c) for c in fresh}
        digests = [d for d, _, c in outs if id(c) in fresh_ids]
        if len(fresh) > 1 and len(set(digests)) == 1 and not all(c.passed for c in fresh):
            return self.result(cls, Status.VIOLATION,
                               f"input-independent output: {len(fresh)} calls with different "
                               f"inputs returned the same bits (a constant or cached result)",
                               cmp=fresh[-1], code="C-CMP-03.input-independent",
                               quantities={"calls": len(fresh)}, t0=t0)
        stale = self.stale(since)
        if stale is not None:
            cmp, prev = stale
            return self.result(cls, Status.VIOLATION,
                               f"stale output: the call at {_where(cmp.case)} returned exactly "
                               f"the bits of an earlier call on other inputs ({_where(prev.case)}): "
                               f"a cached or replayed result", cmp=cmp,
                               code="C-CMP-03.stale-output",
                               quantities={"call": _where(cmp.case),
                                           "same_as": _where(prev.case)}, t0=t0)
        if fresh and fresh[0].passed and not all(c.passed for c in fresh):
            first_bad = next(i for i, c in enumerate(fresh) if not c.passed)
            return self.result(cls, Status.VIOLATION,
                               f"correct on the first call(s), wrong from call {first_bad + 1} on "
                               f"with fresh inputs (results that depend on the call history)",
                               cmp=fresh[first_bad], code="C-CMP-03.stale-output",
                               quantities={"first_wrong_call": first_bad + 1}, t0=t0)
        basic_ok = all(c.passed for c in fresh + per_variant.get("basic", ({}, []))[1])
        bad_variants = {lab: over for lab, (over, comps) in per_variant.items()
                        if any(not c.passed for c in comps)}
        if bad_variants and basic_ok:
            worst_cmp = worst([c for lab in bad_variants for c in per_variant[lab][1]])
            good = [lab for lab in per_variant if lab not in bad_variants]
            return self.result(
                cls, Status.VIOLATION,
                f"correct at the benchmarked shape, wrong at rescaled shapes: "
                f"{', '.join(f'{lab} ({_fmt_over(bad_variants[lab])})' for lab in bad_variants)}",
                cmp=worst_cmp, code="C-CMP-03.shape-specialised",
                quantities={"failing_shapes": {lab: bad_variants[lab] for lab in bad_variants},
                            "passing_shapes": good}, t0=t0)
        if (order is not None and isinstance(order[1], CaseSummary) and order[1].passed
                and not order[0].passed):
            return self.result(cls, Status.VIOLATION,
                               "correct only when the reference ran first in the same "
                               "process (it reuses memory the reference left behind)",
                               cmp=order[0], code="C-CMP-03.order-dependent", t0=t0)
        after = order[1] if order is not None else None
        if order is not None and order[0].passed and after is not None and (
                isinstance(after, KernelFailure) or not after.passed):
            why = after.message if isinstance(after, KernelFailure) else "wrong results"
            return self.result(cls, Status.VIOLATION,
                               f"correct when it runs alone, not after the reference ran in the "
                               f"same process ({why})",
                               cmp=None if isinstance(after, KernelFailure) else after,
                               case=after.case if isinstance(after, KernelFailure) else None,
                               code="C-CMP-03.order-dependent", t0=t0)
        layouts = self._layouts() if basic_ok and not bad_variants else {}
        bad_layouts = {lay: got for lay, got in layouts.items() if got is not None and (
            isinstance(got, KernelFailure) or not got.passed)}
        if bad_layouts:
            lay, got = next(iter(bad_layouts.items()))
            if isinstance(got, KernelFailure):
                why = got.message
            else:
                st = got.stats()
                why = f"{st['mismatched']} of {st['total']} elements out of tolerance"
            return self.result(
                cls, Status.VIOLATION,
                f"correct on contiguous inputs, wrong when they are {' and '.join(bad_layouts)} "
                f"views of the same values ({lay}: {why})",
                cmp=None if isinstance(got, KernelFailure) else got,
                case=got.case if isinstance(got, KernelFailure) else None,
                code="C-CMP-03.layout-specialised",
                quantities={"layouts": {k: ("skipped: the reference rejects it" if v is None
                                            else "fail" if k in bad_layouts else "pass")
                                        for k, v in layouts.items()}}, t0=t0)
        comps_all += [c for c in layouts.values() if isinstance(c, CaseSummary)]
        bad = [c for c in comps_all if not c.passed]
        if bad:
            return self.result(cls, Status.SKIPPED,
                               f"inconclusive: wrong at the benchmarked shape too ({len(bad)} of "
                               f"{len(comps_all)} cases fail alike; see C-PRC-01), so no "
                               f"shape-, call- or order-specific failure to isolate", t0=t0)
        used = [v["label"] for v in self.variants if v["used"]]
        orders = "both run orders" if order is not None and order[1] is not None else \
            "the candidate-first order only"
        if used == ["basic"] or not used:
            rejected = [v for v in self.variants if not v["used"]]
            why = (f"the reference rejects all {len(rejected)} rescaled shapes tried "
                   f"({rejected[0]['why']})" if rejected else
                   "the problem has no size literal to rescale")
            return self.result(cls, Status.SKIPPED,
                               f"inconclusive: shape polymorphism not checked, {why}; "
                               f"{len(comps_all)} cases at the benchmarked shape conform "
                               f"({len(fresh)} fresh calls, {orders})", t0=t0,
                               details={"variants": self.variants})
        return self.result(cls, Status.PASS,
                           f"{len(comps_all)} cases conform: {len(fresh)} fresh calls, shapes "
                           f"{', '.join(used)}, {orders}", t0=t0,
                           details={"variants": self.variants})

    def _layouts(self) -> dict:
        """The benchmarked shape on fresh inputs given as non-contiguous views: layout ->
        CaseSummary, KernelFailure (the candidate raised or returned a wrong shape), or None
        (the reference itself rejects the layout, or the case is outside the domain)."""
        out: dict = {}
        for lay in Adapter.LAYOUTS:
            args = self.inputs({}, "problem", 0, salt=f"layout-{lay}")
            if not self.use("basic", {}).accepts_layout(args, lay):
                out[lay] = None
                continue
            try:
                got = self.measure("basic", {}, "problem", 0, args=args, layout=lay)
            except KernelFailure as fail:
                if fail.code.startswith("integrity."):
                    raise
                out[lay] = fail
                continue
            out[lay] = got[0] if got is not None else None
        return out

    def _orders(self) -> tuple[CaseSummary, "Optional[CaseSummary | KernelFailure]"]:
        """The same input, candidate alone, then after the reference in its process."""
        orc = self.use("basic", {})
        args = self.inputs({}, "problem", 0, "order")
        ref = orc.reference(args)
        low = orc.at_dtype(args)
        case_a = self.case("basic", {}, "problem", 0, order="candidate-first")
        out_a = self.validate(self.call(args, case_a), case_a, ref)
        cmp_a = self.remember(args, out_a, self.compare(orc, case_a, args, out_a, ref, low))
        case_b = self.case("basic", {}, "problem", 0, order="reference-first")
        # no poison here: what the reference leaves behind is the point
        payload = {"args": list(args), "reference": self.problem.path, "source": self.problem.source,
                   "init_inputs": [_to_plain(v) for v in orc.init], "seed": self.build_seed,
                   "poison": False}
        if self.train:
            payload["rng_seed"] = call_seed(args)
        res_b = self.timed_call(lambda: self.handle.request("order", payload))
        if res_b.status == "raised" and res_b.error_type == "ReferenceUnavailable":
            return cmp_a, None  # the reference does not run in the worker: one order only
        try:
            out_b = self.validate(res_b, case_b, ref)
        except KernelFailure as fail:
            if fail.code.startswith("integrity."):
                raise
            return cmp_a, fail  # fails only after the reference ran: the order is at fault
        return cmp_a, CaseSummary.of(self.compare(orc, case_b, args, out_b, ref, low))


def result_id(cls: str) -> str:
    """The id of a KernelBench run's result for class ``cls``."""
    return f"kb-{cls.lower()}"


def error_result(cls: str, code: str, message: str, reproduce: str = "", *,
                 case: Optional[Case] = None, violation: bool = False,
                 signature: Optional[Mapping] = None, t0: Optional[float] = None
                 ) -> ContractResult:
    """An ``error`` verdict for class ``cls``: the candidate's failure (``violation``: with
    the failing case, as the runner's), the checker's own, a load error, or a class left
    unmeasured after tampering (``signature``: the tampering's)."""
    v = Violation(contract_id=result_id(cls), contract_class=cls, case=case, code=code,
                  message=message, reproduce=reproduce) if violation else None
    return ContractResult(contract=cls, id=result_id(cls), verdict=Status.ERROR,
                          message=message, violation=v,
                          signature=dict(signature) if signature else {"code": code},
                          seconds=time.perf_counter() - t0 if t0 is not None else 0.0,
                          reproduce=reproduce)


def out_of_memory(exc: BaseException) -> bool:
    """Whether an exception is memory running out (Python's, numpy's, or torch's CPU
    allocator, which raises a RuntimeError)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text
                                              or "not enough memory" in text
                                              or "out of memory" in text)


def _where(case: Case) -> str:
    extra = {k: v for k, v in case.extra.items() if k != "shape"}
    tail = "".join(f" {k}={v}" for k, v in extra.items())
    return f"shape {case.extra.get('shape')} family={case.family} trial={case.trial}{tail}"



def _fmt_over(over: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in over.items())


def _same_exceptional(out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return ((np.isnan(out) & np.isnan(ref)) | (np.isposinf(out) & np.isposinf(ref))
                | (np.isneginf(out) & np.isneginf(ref)))


def _in_domain(args, ref, low) -> bool:
    ref = np.asarray(ref, dtype=np.float64)
    inputs_finite = all(np.all(np.isfinite(np.asarray(a, dtype=np.float64)))
                        for a in args if _is_float_array(a))
    if inputs_finite and not np.all(np.isfinite(ref)):
        return False  # e.g. log of a negative: outside the problem's domain
    if low is not None and np.asarray(low).dtype.kind not in "iub":
        low = np.asarray(low, dtype=np.float64)
        if np.any(np.isfinite(ref) & ~np.isfinite(low)):
            return False  # the dtype itself overflows here: its behaviour is not declared
    return True


def _nan_where_finite(c: Comparison) -> int:
    return int(np.sum(np.isnan(c.out) & np.isfinite(c.ref)))


def check_kernelbench(reference: str, candidate: str, *, dtype: str = "float32",
                      device: str = "cpu", classes: Optional[Sequence[str]] = None,
                      declare: Optional[Mapping[str, object]] = None, seed: Optional[int] = None,
                      timeout: float = 60.0, kernelbench: bool = True,
                      progress: Optional[Callable[[], None]] = None,
                      problem: Optional[Problem] = None, scale: float = 1.0,
                      max_elements: Optional[int] = None, train: bool = False) -> KernelBenchRun:
    """Check the candidate file's ``ModelNew`` against the reference file's ``Model``
    (``problem``: the reference already loaded by :func:`load_problem`).

    ``train``: both models in training mode (dropout on), every forward pass on both
    sides under the same seed, drawn from its inputs (:func:`call_seed`); the default is
    eval mode on both sides.  ``seed`` None draws a secret per-run seed (reported afterwards): inputs and
    weights a candidate cannot have precomputed.  Never raises for the candidate's
    misbehaviour (that is a verdict); raises :class:`UsageError` for a reference
    that is not a KernelBench problem or bad arguments."""
    t_start = time.perf_counter()
    if dtype not in DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    wanted = list(classes or MODULE_CLASSES)
    for w in wanted:
        if w not in MODULE_CLASSES:
            from ...errors import did_you_mean
            raise UsageError(f"{w!r} is not a class the KernelBench path checks "
                             f"({', '.join(MODULE_CLASSES)}){did_you_mean(w, MODULE_CLASSES)}")
    if not os.path.exists(candidate):
        raise UsageError(f"no such file: {candidate}")
    try:
        _torch()
    except ImportError as exc:  # pragma: no cover - torch is required here
        raise UsageError("kcontract kernelbench needs torch: pip install 'kcontract[torch]'") from exc
    seed = secrets.randbelow(2 ** 31) if seed is None else int(seed)
    problem = problem if problem is not None else load_problem(reference, scale, max_elements)
    sc = problem.scaling
    fmt = get_format(dtype)
    declared = dict(declare or {})
    if "deterministic" not in declared and device not in ("cpu", ""):
        declared["deterministic"] = "false"  # accelerators' atomics: declare it to check it
    claims = make_claims(fmt, declared)
    repro = (f"kcontract kernelbench {os.path.relpath(reference)} {os.path.relpath(candidate)} "
             f"--dtype {dtype} --seed {seed}" + ("" if device == "cpu" else f" --device {device}")
             + "".join(f" --declare {k}={v}" for k, v in (declare or {}).items())
             + (f" --max-elements {sc.max_elements}" if sc.max_elements else "")
             + (f" --scale {sc.factor:g}" if sc.factor != 1.0 and not sc.max_elements else "")
             + (" --train" if train else ""))
    from ...adapters import get_adapter
    env = get_adapter("torch").environment(device)
    env["kcontract"] = __version__
    env["problem_sha256"] = problem.sha256
    env["problem_scale"] = sc.as_dict()  # the sizes actually used
    env["module_mode"] = "train" if train else "eval"
    run = RunResult(kernel=os.path.abspath(candidate), op=f"kernelbench:{problem.name}",
                    dtype=dtype, framework="torch", device=device, claims=claims.as_dict(),
                    environment=env, suite_version=__version__)
    out = KernelBenchRun(reference=os.path.abspath(reference), candidate=os.path.abspath(candidate),
                         problem=problem.name, dtype=dtype, device=device, seed=seed, run=run,
                         scaling=sc, mode="train" if train else "eval")
    handle = ModelProcess(candidate, dtype=dtype, device=device, timeout=timeout, train=train)
    try:
        try:
            run.sandbox = handle.sandbox_name
            info = handle.start()
            run.kernel_hash = info.get("source_sha256", "")
        except KernelLoadError as exc:
            for cls in wanted:
                run.results.append(error_result(cls, "kernel.load", str(exc)))
            handle = None
        if handle is not None:
            mc = ModuleCheck(problem, handle, dtype, seed, claims, repro, progress, train=train)
            order = [c for c in MODULE_CLASSES if c in wanted]
            tampered = None
            for cls in order:
                if tampered is not None:
                    # measurements of a candidate that tampered with its process mean nothing
                    run.results.append(error_result(
                        cls, tampered.signature.get("code", ""),
                        f"not measured: {tampered.contract} found {tampered.message}",
                        tampered.reproduce, signature=tampered.signature))
                    continue
                res = mc.run_class(cls)
                run.results.append(res)
                if res.verdict == Status.ERROR and str(
                        (res.signature or {}).get("code", "")).startswith("integrity."):
                    tampered = res
            run.timings.update(mc.timings)
            out.variants = mc.variants
            basic = mc.oracles.get("basic")
            if basic is not None and basic.allowance is not None:
                out.allowance = basic.allowance.as_dict()
            if kernelbench:
                out.kernelbench = kernelbench_verdict(handle, reference, dtype, problem.source)
            run.modules = handle.modules()
            # what enforced the worker's limits and who read its FP registers, as every run
            run.limits = dict(handle.limits)
            run.fp_state = handle.fp_state
    finally:
        if handle is not None:
            handle.close()
    if kernelbench and not out.kernelbench:
        out.kernelbench = {"passed": False, "message": "the candidate does not load",
                           "passed_trials": 0, "trials": KERNELBENCH_TRIALS}
    run.seconds = time.perf_counter() - t_start
    run.timings["total"] = run.seconds
    return out


def kernelbench_verdict(handle: ModelProcess, reference: str, dtype: str,
                        source: Optional[str] = None) -> dict:
    """What KernelBench's own check says (run in the candidate's process, as it does)."""
    tol = KERNELBENCH_TOLERANCE[dtype]
    status, reply = handle.raw("kernelbench", {"reference": os.path.abspath(reference),
                                               "source": source,
                                               "seed": KERNELBENCH_SEED,
                                               "trials": KERNELBENCH_TRIALS,
                                               "atol": tol, "rtol": tol})
    if status != "ok":
        return {"passed": False, "trials": KERNELBENCH_TRIALS, "passed_trials": 0, "atol": tol,
                "rtol": tol, "message": f"the candidate {status}: "
                                        f"{reply.get('message') or reply.get('error', '')}"}
    return reply


__all__ = ["KERNELBENCH_TOLERANCE", "MODULE_CLASSES", "KernelBenchRun", "Problem", "ProblemOp",
           "check_kernelbench", "load_problem", "shape_variants", "make_inputs"]
