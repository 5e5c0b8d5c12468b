"""Freivalds verification of matrix products with a floating-point-aware decision.

Stage 1 (every call, O(n^2), reads A, B and C once each): with a Rademacher
vector r, compute y = B r, z = A y, w = C r in float32 (float64 for float64
operands), and the residual d = z - w in float64.  Rows whose |d_i| stands out
from the calibrated rounding noise of the residual are *screened*.

Stage 2 (only for screened rows, O(n^2) per row): recompute those rows of the
product in float64, compare every element with the per-element bound of the
rounding-error model (:mod:`._model`), and report the elements that exceed it.
Only stage 2 can fail a product, so the false-alarm probability is the model's,
whatever the screen does.  See docs/freivalds.md.
"""
from __future__ import annotations

import functools
import hashlib
import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..errors import UsageError
from ..formats import get_format, round_to
from . import _model as model
from ._backend import NUMPY_OPS, ops_for, sub_index

DEFAULT_FALSE_ALARM = 1e-9
DEFAULT_MAX_ROWS = 32
#: At most this many candidate elements are recomputed from a left projection.
MAX_CANDIDATES = 4096


class NonFiniteOperandError(UsageError):
    """An operand (A or B) holds NaN or Inf: the product has no finite reference."""


class ProductCheckError(RuntimeError):
    """Raised by :func:`kcontract.freivalds.guard` (``on_fail="raise"``) when a
    product fails verification.  ``.result`` holds the :class:`FreivaldsResult`."""

    def __init__(self, message: str, result: "FreivaldsResult"):
        super().__init__(message)
        self.result = result


@dataclass
class Suspect:
    """One element that failed the element test."""

    index: tuple  # (batch..., i, j)
    value: float  # the element of C
    expected: float  # float64 recomputation
    bound: float  # the model bound on |value - expected|

    @property
    def error(self) -> float:
        return self.value - self.expected

    def to_dict(self) -> dict:
        return {"index": list(self.index), "value": _num(self.value),
                "expected": _num(self.expected), "error": _num(self.error),
                "bound": _num(self.bound)}


@dataclass
class FreivaldsResult:
    """Outcome of :func:`verify`.  ``bool(result)`` is ``result.passed``."""

    passed: bool
    reason: str  # verified | corrupted | nonfinite | empty | empty-sum
    suspect_rows: list  # (batch..., i) rows with failing elements
    suspects: list  # Suspect elements (capped by the rows examined)
    threshold: np.ndarray  # stage-1 threshold on |d_i|, one per matrix (batch shape)
    ratio: float  # decisive ratio: max element error / bound (stage 2) or max |d|/threshold
    false_alarm: float  # probability an honest product fails, the thresholds' target
    screen_ratio: float  # max_i |d_i| / threshold
    screened_rows: list = field(default_factory=list)  # rows passed to stage 2
    unexamined_rows: int = 0  # screened rows beyond max_rows (not recomputed)
    suspect_columns: list = field(default_factory=list)  # (batch..., j) from the left projection
    row_failures: list = field(default_factory=list)  # rows failing the row aggregate test
    shape: tuple = ()  # (batch, M, K, N)
    operand_format: str = ""
    accumulate: str = ""
    output_format: str = ""
    check_precision: str = ""
    rounds: int = 1
    groups: int = 1
    bound: str = "probabilistic"
    seed: Optional[int] = None
    calibrated: bool = True
    noise_scale: Any = None  # stage-1 noise scale per matrix
    seconds: float = 0.0
    backend: str = "numpy"
    repaired: Any = None  # corrected copy of C (repair=True)
    message: str = ""

    def __bool__(self) -> bool:
        return self.passed

    @property
    def suspect_elements(self) -> list:
        return [s.index for s in self.suspects]

    def to_dict(self) -> dict:
        thr = np.asarray(self.threshold, dtype=np.float64)
        return {
            "passed": self.passed, "reason": self.reason, "message": self.message,
            "shape": {"batch": list(self.shape[0]) if self.shape else [],
                      "M": self.shape[1] if self.shape else 0,
                      "K": self.shape[2] if self.shape else 0,
                      "N": self.shape[3] if self.shape else 0},
            "operand_format": self.operand_format, "accumulate": self.accumulate,
            "output_format": self.output_format, "check_precision": self.check_precision,
            "rounds": self.rounds, "groups": self.groups, "bound": self.bound,
            "seed": self.seed,
            "false_alarm": self.false_alarm,
            "threshold": {"min": _num(thr.min()) if thr.size else None,
                          "max": _num(thr.max()) if thr.size else None},
            "ratio": _num(self.ratio), "screen_ratio": _num(self.screen_ratio),
            "calibrated": self.calibrated,
            "screened_rows": [list(r) for r in self.screened_rows],
            "unexamined_rows": self.unexamined_rows,
            "suspect_rows": [list(r) for r in self.suspect_rows],
            "suspect_columns": [list(c) for c in self.suspect_columns],
            "row_failures": [list(r) for r in self.row_failures],
            "suspects": [s.to_dict() for s in self.suspects],
            "seconds": self.seconds, "backend": self.backend,
        }


def _num(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


# ---------------------------------------------------------------------------
# input checking
# ---------------------------------------------------------------------------

@dataclass
class _Problem:
    a: Any
    b: Any
    c: Any
    ops: Any
    batch: tuple
    batch_a: tuple
    batch_b: tuple
    M: int
    K: int
    N: int
    op_fmt: Any
    acc: Any
    out: Any
    cdtype: Any
    cname: str
    bias: Optional[np.ndarray] = None  # host float64 (N,)
    groups: int = 1  # column groups of the stage-1 residual
    deterministic: bool = False  # worst-case element bounds


def _as_arrays(a, b, c):
    ops = ops_for(a, b, c)
    if ops is None:
        raise UsageError("a, b and c must be all numpy arrays or all torch tensors")
    if ops is NUMPY_OPS:
        a, b, c = (np.asarray(x) for x in (a, b, c))
    else:
        devs = {str(x.device) for x in (a, b, c)}
        if len(devs) != 1:
            raise UsageError(f"a, b and c are on different devices: {sorted(devs)}")
    return a, b, c, ops


def _problem(a, b, c, accumulate, output_format, bias=None) -> _Problem:
    a, b, c, ops = _as_arrays(a, b, c)
    for name, x in (("a", a), ("b", b), ("c", c)):
        if len(ops.shape(x)) < 2:
            raise UsageError(f"{name} must have at least 2 dimensions (..., rows, cols); "
                             f"got shape {ops.shape(x)}")
    sa, sb, sc = ops.shape(a), ops.shape(b), ops.shape(c)
    M, K = sa[-2:]
    K2, N = sb[-2:]
    if K != K2:
        raise UsageError(f"inner dimensions differ: a is {sa} and b is {sb} ({K} != {K2})")
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        raise UsageError(f"batch dimensions of a {sa[:-2]} and b {sb[:-2]} do not broadcast") \
            from None
    if tuple(sc) != batch + (M, N):
        raise UsageError(f"c has shape {tuple(sc)}; a @ b has shape {batch + (M, N)}")
    fa, fb, fc = ops.format_name(a), ops.format_name(b), ops.format_name(c)
    for name, x, f in (("a", a, fa), ("b", b, fb), ("c", c, fc)):
        if f is None:
            raise UsageError(f"{name} has unsupported dtype {ops.dtype_str(x)}; supported: "
                             "float64, float32, float16, bfloat16, float8_e4m3fn, float8_e5m2")
    if fa != fb:
        raise UsageError(f"dtype mismatch: a is {fa} and b is {fb}; cast one operand so "
                         "both have the dtype the product was computed from")
    op_fmt = get_format(fa)
    if accumulate is None:
        accumulate = "float64" if fa == "float64" else "float32"
    acc = get_format(accumulate)
    out = get_format(output_format if output_format is not None else fc)
    cname = "float64" if "float64" in (fa, fc) else "float32"
    bias64 = None
    if bias is not None:
        if ops_for(bias, a) is None:
            raise UsageError("bias must be of the same kind (numpy / torch) as a, b and c")
        if tuple(ops.shape(bias)) != (N,) or ops.format_name(bias) is None:
            raise UsageError(f"bias must be a float vector of length N={N}; got shape "
                             f"{tuple(ops.shape(bias))} and dtype {ops.dtype_str(bias)}")
        bias64 = ops.take(bias, ())
        if not np.isfinite(bias64).all():
            raise NonFiniteOperandError("bias contains NaN or Inf")
    return _Problem(a, b, c, ops, batch, tuple(sa[:-2]), tuple(sb[:-2]), M, K, N, op_fmt,
                    acc, out, ops.compute_dtype(cname), cname, bias64)


def _units(p: _Problem) -> model.Units:
    return _units_for(p.acc.name, p.out.name, p.cname)


@functools.lru_cache(maxsize=64)
def _units_for(acc_name: str, out_name: str, check_name: str) -> model.Units:
    acc, out = get_format(acc_name), get_format(out_name)
    return model.Units(acc=acc.u, out=out.u, check=get_format(check_name).u,
                       recompute=2.0 ** -53, acc_tiny=acc.smallest_subnormal / 2,
                       out_tiny=out.smallest_subnormal / 2)


# ---------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------

def verify(a, b, c, *, rounds: int = 1, seed: Optional[int] = None,
           accumulate: Optional[str] = None, output_format: Optional[str] = None,
           false_alarm: float = DEFAULT_FALSE_ALARM, max_rows: int = DEFAULT_MAX_ROWS,
           localize: bool = True, repair: bool | str = False, bias=None,
           groups: int = 1, bound: str = "probabilistic", _pre=None) -> FreivaldsResult:
    """Check that ``c`` is ``a @ b`` up to honest floating-point rounding.

    ``a`` (..., M, K), ``b`` (..., K, N), ``c`` (..., M, N): numpy arrays or torch
    tensors on one device; batch dimensions broadcast as in ``matmul``.  Operand
    dtypes float64, float32, float16, bfloat16, float8_e4m3fn, float8_e5m2 (a and
    b must agree); ``c`` may have any of these dtypes.

    ``accumulate``: the accumulator format the product was declared to use
    (default float32, float64 for float64 operands).  ``output_format``: the
    format C was rounded to (default: C's dtype).  ``false_alarm``: the
    probability an honest product fails (union bound over all elements).
    ``rounds``: independent random vectors (1 suffices for single faults).
    ``bias``: optional vector of length N added to every row (``F.linear``).
    ``groups``: split the columns of C into this many groups, each with its own
    residual (a blocked check: costs three n x groups products instead of three
    matrix-vector products, and divides the residual noise by sqrt(groups) --
    useful when C is stored in bfloat16 / float16, whose rounding dominates).
    ``bound``: ``"probabilistic"`` (default; the rounding-error model of
    docs/freivalds.md) or ``"deterministic"`` (worst-case gamma_K bounds: no
    assumption on the rounding errors, no false alarms ever, but only faults
    above about K u sum|a_ik b_kj| are caught).
    ``seed``: reproducible randomness (default: fresh entropy, reported in the
    result).  ``max_rows``: screened rows recomputed in float64.  ``repair``:
    True returns a corrected copy of C in ``result.repaired``; ``"inplace"``
    corrects C itself.

    Raises :class:`UsageError` for bad input (shape / dtype mismatch, unsupported
    dtype, bad options) and :class:`NonFiniteOperandError` for NaN/Inf in a or b.
    """
    t0 = time.perf_counter()
    if not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise UsageError(f"rounds must be a positive integer, got {rounds!r}")
    try:
        pfa = float(false_alarm)
    except (TypeError, ValueError):
        pfa = float("nan")
    if not (0.0 < pfa < 1.0):
        raise UsageError(f"false_alarm must be in (0, 1), got {false_alarm!r}")
    if repair not in (False, True, "inplace"):
        raise UsageError(f"repair must be False, True or 'inplace', got {repair!r}")
    if bound not in ("probabilistic", "deterministic"):
        raise UsageError(f"bound must be 'probabilistic' or 'deterministic', got {bound!r}")
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise UsageError(f"groups must be a positive integer, got {groups!r}")
    if groups > 1 and _pre is not None:
        raise UsageError("groups > 1 cannot use a cached weight vector")
    p = _problem(a, b, c, accumulate, output_format, bias)
    p.groups = int(min(groups, max(p.N, 1)))
    p.deterministic = bound == "deterministic"
    if seed is None:
        seed = int.from_bytes(os.urandom(8), "little") >> 1
    elif not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UsageError(f"seed must be a non-negative integer, got {seed!r}")
    res = FreivaldsResult(
        passed=True, reason="verified", suspect_rows=[], suspects=[],
        threshold=np.zeros(p.batch), ratio=0.0,
        false_alarm=0.0 if p.deterministic else pfa, screen_ratio=0.0,
        shape=(p.batch, p.M, p.K, p.N), operand_format=p.op_fmt.name, accumulate=p.acc.name,
        output_format=p.out.name, check_precision=p.cname, rounds=int(rounds),
        groups=p.groups, bound=bound, seed=seed, backend=p.ops.name)
    items = int(np.prod(p.batch, dtype=np.int64)) if p.batch else 1
    with p.ops.exact_mode():
        if items * p.M * p.N == 0:
            res.reason, res.message = "empty", "empty product: nothing to verify"
        elif p.K == 0:
            _check_empty_sum(p, res, repair)
        else:
            _verify(p, res, int(rounds), seed, pfa, max(0, int(max_rows)), localize, repair,
                    _pre)
    res.seconds = time.perf_counter() - t0
    return res


def _stage1(p: _Problem, rounds: int, seed: int, cdtype, pre=None):
    """y = B r, z = A y, w = C r for each round, as host float64 arrays of shape
    (rounds, batch..., M, groups).  ``pre``: a callable (problem, cdtype) ->
    (r on the device, B r, r) supplying a cached B r (the guard)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _stage1_rounds(p, rounds, seed, cdtype, pre)


def _stage1_rounds(p: _Problem, rounds: int, seed: int, cdtype, pre):
    """(z, w) of shape (rounds, batch..., M, groups)."""
    ops = p.ops
    G = p.groups
    zs, ws = [], []
    for k in range(rounds):
        if G > 1:
            r = rademacher(seed, k, p.N)
            R = np.zeros((p.N, G), dtype=np.float64)
            R[np.arange(p.N), group_of(p.N, G)] = r
            rd = ops.from_host(R, cdtype)
            y = ops.matmat(p.b, rd, cdtype)
            z = ops.to_host64(ops.matmat(p.a, y, cdtype))
            w = ops.to_host64(ops.matmat(p.c, rd, cdtype))
            if p.bias is not None:
                z = z + p.bias @ R
        else:
            if pre is not None:
                rd, y, r = pre(p, cdtype)
            else:
                r = rademacher(seed, k, p.N)
                rd = ops.from_host(r, cdtype)
                y = ops.matvec(p.b, rd, cdtype)
            z = ops.to_host64(ops.matvec(p.a, y, cdtype))[..., None]
            w = ops.to_host64(ops.matvec(p.c, rd, cdtype))[..., None]
            if p.bias is not None:
                z = z + float(p.bias @ r)
        zs.append(z)
        ws.append(w)
    if rounds == 1:
        return zs[0][None], ws[0][None]
    return np.stack(zs), np.stack(ws)


def group_of(N: int, G: int) -> np.ndarray:
    """Group of each column: G contiguous blocks of (nearly) equal width."""
    return (np.arange(N, dtype=np.int64) * G) // N


def rademacher(seed: int, stream: int, n: int) -> np.ndarray:
    """n random +-1 signs (int8) from (seed, stream), reproducibly (the bits of
    SHAKE-256 of the seed: unpredictable without the seed).

    Signs whose sum is smaller than sqrt(n)/4 in magnitude are redrawn, so that
    an offset added to a whole row (or column) of C never cancels out of the
    residual; otherwise the signs are independent and fair."""
    for attempt in range(64):
        key = (seed.to_bytes(16, "little", signed=False) + stream.to_bytes(8, "little")
               + attempt.to_bytes(2, "little"))
        bits = np.frombuffer(hashlib.shake_256(key).digest((n + 7) // 8), dtype=np.uint8)
        r = _SIGNS[np.unpackbits(bits, count=n)]
        if n < 16 or abs(int(r.sum(dtype=np.int64))) >= 0.25 * math.sqrt(n):
            break
    return r


_SIGNS = np.array([1, -1], dtype=np.int8)


def _verify(p: _Problem, res: FreivaldsResult, rounds, seed, pfa, max_rows, localize, repair,
            pre=None):
    ops = p.ops
    z, w = _stage1(p, rounds, seed, p.cdtype, pre)
    zf = np.isfinite(z)
    if not zf.all() or not np.isfinite(w).all():
        for name, x in (("a", p.a), ("b", p.b)):
            if not ops.all_finite(x):
                pos = ops.nonfinite_positions(x)
                raise NonFiniteOperandError(
                    f"operand {name} contains NaN or Inf (first at {pos[0] if pos else '?'}); "
                    "the product has no finite reference to verify against")
        if not zf.all() or (p.cname == "float32" and ops.all_finite(p.c)):
            # finite operands but the float32 check overflowed: redo it in float64
            p.cdtype, p.cname = ops.compute_dtype("float64"), "float64"
            res.check_precision = "float64"
            z, w = _stage1(p, rounds, seed, p.cdtype)
    units = _units(p)
    items = int(np.prod(p.batch, dtype=np.int64)) if p.batch else 1
    G = p.groups
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(z - w)  # (rounds, batch..., M, G)
    # per matrix: (items, rounds * M * G)
    per = rounds * p.M * G
    if rounds == 1:
        dI = d.reshape(items, per)
    else:
        dI = np.moveaxis(d.reshape(rounds, items, p.M * G), 0, 1).reshape(items, per)
    finite = np.isfinite(dI)
    dcal = np.where(finite, dI, 0.0)
    c_norm, s_norm = _row_scales(p, seed, items)
    # a group of N/G columns: row norms and the check's lengths shrink with it
    gs = 1.0 / math.sqrt(G)
    scale, cap, calibrated = model.screen_scale(dcal, c_norm * gs, s_norm * gs, p.K,
                                                -(-p.N // G), units)
    tau = model.LAMBDA_SCREEN * scale
    res.threshold = tau.reshape(p.batch) if p.batch else tau.reshape(())
    res.noise_scale = scale.reshape(p.batch) if p.batch else scale.reshape(())
    res.calibrated = bool(calibrated)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(dI > 0, dI / tau[:, None], 0.0)
    ratio = np.where(finite, ratio, np.inf)
    ratio_rows = ratio.reshape(items, rounds, p.M, G).max(axis=(1, 3))  # (items, M)
    res.screen_ratio = float(ratio_rows.max())
    flagged = np.argwhere(ratio_rows > 1.0)
    if flagged.size == 0:
        res.ratio = res.screen_ratio
        return
    order = np.argsort(-ratio_rows[flagged[:, 0], flagged[:, 1]], kind="stable")
    flagged = flagged[order]
    full_idx = [np.unravel_index(int(t), p.batch) if p.batch else () for t in flagged[:, 0]]
    res.screened_rows = [tuple(int(v) for v in full_idx[k]) + (int(flagged[k, 1]),)
                         for k in range(len(flagged))]
    examine = flagged[:max_rows]
    res.unexamined_rows = int(len(flagged) - len(examine))
    n_el = items * p.M * p.N
    L_e = model.element_log_term(n_el, pfa / 2)
    L_r = math.log(max(items * p.M, 1) / (pfa / 2))
    fixes = []
    worst = 0.0
    if len(examine):
        pairs = []
        for k in range(len(examine)):
            idx = tuple(int(v) for v in full_idx[k])
            pairs.append((sub_index(idx, p.batch_a), sub_index(idx, p.batch_b), int(examine[k, 1])))
        cstar, abssum = ops.exact_rows(p.a, p.b, pairs)
        if p.bias is not None:
            cstar = cstar + p.bias
            abssum = abssum + np.abs(p.bias)
        for k, (ai, bi, i) in enumerate(pairs):
            idx = tuple(int(v) for v in full_idx[k])
            crow = ops.take(p.c, idx + (i,))
            bound = model.element_bounds(cstar[k], abssum[k], p.K, units, L_e,
                                         recompute_same_precision=p.acc.u <= 2.0 ** -53,
                                         deterministic=p.deterministic)
            err, bad = _element_errors(crow, cstar[k], bound, p.out)
            with np.errstate(divide="ignore", invalid="ignore"):
                er = np.where(bound > 0, np.abs(err) / bound, np.where(err != 0, np.inf, 0.0))
            er = np.where(bad, np.inf, er)
            worst = max(worst, float(np.max(er)) if er.size else 0.0)
            # row aggregate over the elements that pass individually: catches
            # diffuse errors (e.g. a lower-precision accumulation) each below its bound
            sig2 = model.element_sigma2(cstar[k], abssum[k], p.K, units)
            ok = np.isfinite(err) & (er <= 1.0) & (sig2 > 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                q = float(np.sum(np.where(ok, err * err / sig2, 0.0)))
            row_fail = (not p.deterministic) and q > model.row_aggregate_limit(p.N, L_r)
            cols = np.flatnonzero(er > 1.0)
            if row_fail:
                res.row_failures.append(idx + (i,))
                worst = max(worst, q / model.row_aggregate_limit(p.N, L_r))
            if cols.size or row_fail:
                res.suspect_rows.append(idx + (i,))
                for j in cols:
                    res.suspects.append(Suspect(idx + (i, int(j)), float(crow[j]),
                                                float(cstar[k, j]), float(bound[j])))
                fix_cols = range(p.N) if row_fail else cols
                for j in fix_cols:
                    fixes.append(((idx, i, int(j)), float(cstar[k, j])))
    res.ratio = worst
    if res.suspect_rows:
        res.passed, res.reason = False, "corrupted"
        nonfinite = any(not np.isfinite(s.value) for s in res.suspects)
        if nonfinite:
            res.reason = "nonfinite"
        if localize and res.unexamined_rows:
            _locate_more(p, res, flagged[max_rows:], units, L_e, seed, fixes)
        res.message = (f"{len(res.suspects)} element(s) in {len(res.suspect_rows)} row(s) "
                       "exceed the rounding-error bound")
    else:
        res.message = (f"{len(flagged)} row(s) screened, all within the element bounds")
    if repair and fixes:
        vals = [((ci, i, j), float(round_to(np.float64(v), p.out))) for (ci, i, j), v in fixes]
        res.repaired = ops.set_elements(p.c, vals, inplace=(repair == "inplace"))


#: Rows sampled per matrix for the screen's row scales; products with at most
#: SMALL_ROWS rows in all use every row.
SAMPLE_ROWS = 4
SMALL_ROWS = 64


def _row_scales(p: _Problem, seed: int, items: int):
    """Typical ||C_i|| and sqrt(sum_k a_ik^2 ||b_k||^2) per matrix, from a few
    random rows of A, B and C (O(K + N) per row).  Small products use all rows
    and the largest values."""
    ops = p.ops
    every = items * p.M <= SMALL_ROWS
    pick = random.Random(seed)
    rows = np.arange(p.M) if every or p.M <= SAMPLE_ROWS else \
        np.array(sorted(pick.sample(range(p.M), SAMPLE_ROWS)))
    cn = ops.row_norms(p.c, rows)  # (batch..., r)
    an = ops.row_norms(p.a, rows)  # (batch_a..., r)
    # rms_k ||B_k|| = ||B||_F / sqrt(K): sampled from rows of B, or from its
    # columns when those are the contiguous ones (B = W^T in a linear layer)
    if ops.rows_contiguous(p.b) or p.N <= SAMPLE_ROWS:
        krows = np.arange(p.K) if p.K <= SAMPLE_ROWS else \
            np.array(sorted(pick.sample(range(p.K), SAMPLE_ROWS)))
        bn = ops.row_norms(p.b, krows)  # (batch_b..., kr)
        brms = np.sqrt(np.einsum("...i,...i->...", bn, bn) / bn.shape[-1])  # (batch_b...)
    else:
        jcols = np.array(sorted(pick.sample(range(p.N), SAMPLE_ROWS)))
        bn = ops.col_norms(p.b, jcols)
        brms = np.sqrt(np.einsum("...i,...i->...", bn, bn) / bn.shape[-1] * p.N / max(p.K, 1))
    sn = an * brms[..., None]
    cn = np.broadcast_to(cn, p.batch + (len(rows),)).reshape(items, len(rows))
    sn = np.broadcast_to(sn, p.batch + (len(rows),)).reshape(items, len(rows))
    cn = np.where(np.isfinite(cn), cn, 0.0)
    if every:
        return cn.max(axis=1), sn.max(axis=1)
    return model.median_rows(cn), model.median_rows(sn)


def _element_errors(crow, cstar, bound, out_fmt):
    """Errors of one row against its float64 recomputation; returns (err, bad)
    where non-finite elements are judged: an Inf is honest when the exact value
    overflows the output format (same sign), NaN only for formats without Inf."""
    err = crow - cstar
    bad = np.zeros(crow.shape, dtype=bool)
    nf = ~np.isfinite(crow)
    if nf.any():
        overflow = (np.abs(cstar) + bound) >= out_fmt.max
        if out_fmt.has_inf:
            honest = nf & np.isinf(crow) & overflow & (np.sign(crow) == np.sign(cstar))
        else:
            honest = nf & np.isnan(crow) & overflow
        err = np.where(honest, 0.0, err)
        bad = nf & ~honest
        err = np.where(bad, np.inf, err)
    return err, bad


def _locate_more(p, res, rest, units, L_e, seed, fixes):
    """Localise faults in screened rows beyond ``max_rows`` with a left
    projection s^T C - (s^T A) B: its large entries are the suspect columns,
    and the candidate elements (screened row x suspect column) are recomputed."""
    ops = p.ops
    rows_by_item: dict[int, list[int]] = {}
    for t, i in rest:
        rows_by_item.setdefault(int(t), []).append(int(i))
    budget = MAX_CANDIDATES
    items = int(np.prod(p.batch, dtype=np.int64)) if p.batch else 1
    cnorm, snorm = _row_scales(p, seed, items)
    for t, rows in rows_by_item.items():
        idx = tuple(int(v) for v in np.unravel_index(t, p.batch)) if p.batch else ()
        ai, bi = sub_index(idx, p.batch_a), sub_index(idx, p.batch_b)
        s = rademacher(seed, 1_000 + t, p.M)
        sd = ops.from_host(s, p.cdtype)
        A_i, B_i, C_i = p.a[ai], p.b[bi], p.c[idx]
        g = ops.vecmat(sd, A_i, p.cdtype)
        gz = ops.to_host64(ops.vecmat(g, B_i, p.cdtype))
        gw = ops.to_host64(ops.vecmat(sd, C_i, p.cdtype))
        with np.errstate(invalid="ignore"):
            e = np.abs(gz - gw)
        fin = np.isfinite(e)
        # column scales: a column of s^T C sums M rows, so its typical size is
        # that of a row of C times sqrt(M / N)
        ratio = math.sqrt(p.M / max(p.N, 1))
        scale, cap, _ = model.screen_scale(np.where(fin, e, 0.0)[None, :],
                                           cnorm[t:t + 1] * ratio, snorm[t:t + 1] * ratio,
                                           p.K, p.M, units)
        thr = model.LAMBDA_SCREEN * scale[0]
        cols = np.flatnonzero(~fin | (e > thr))
        res.suspect_columns.extend(idx + (int(j),) for j in cols)
        quads = [(ai, bi, i, int(j)) for i in rows for j in cols][:budget]
        budget -= len(quads)
        if not quads:
            continue
        cstar, abssum = ops.exact_elements(p.a, p.b, quads)
        if p.bias is not None:
            jj = np.array([q[3] for q in quads])
            cstar = cstar + p.bias[jj]
            abssum = abssum + np.abs(p.bias[jj])
        vals = np.array([float(ops.take(p.c, idx + (q[2], q[3]))) for q in quads])
        bound = model.element_bounds(cstar, abssum, p.K, units, L_e,
                                     recompute_same_precision=p.acc.u <= 2.0 ** -53,
                                     deterministic=p.deterministic)
        err, bad = _element_errors(vals, cstar, bound, p.out)
        hit = bad | (np.abs(err) > bound)
        for q, v, cs, bd, h in zip(quads, vals, cstar, bound, hit):
            if h:
                res.suspects.append(Suspect(idx + (q[2], q[3]), float(v), float(cs), float(bd)))
                if idx + (q[2],) not in res.suspect_rows:
                    res.suspect_rows.append(idx + (q[2],))
                fixes.append(((idx, q[2], q[3]), float(cs)))
        if budget <= 0:
            break


def _check_empty_sum(p: _Problem, res: FreivaldsResult, repair) -> None:
    """K = 0: every element of C must be exactly zero (the empty sum), or the
    bias rounded to the output format."""
    ops = p.ops
    C = ops.to_host64(p.c.reshape(-1)) if ops is not NUMPY_OPS else \
        np.asarray(p.c, dtype=np.float64).reshape(-1)
    expect = np.zeros(p.N) if p.bias is None else round_to(p.bias, p.out)
    expect = np.broadcast_to(expect, (C.size // max(p.N, 1), p.N)).reshape(-1)
    bad = np.flatnonzero(C != expect)  # NaN != x is True
    res.ratio = float("inf") if bad.size else 0.0
    if bad.size:
        res.passed, res.reason = False, "empty-sum"
        shape = p.batch + (p.M, p.N)
        for f in bad[:1000]:
            idx = tuple(int(v) for v in np.unravel_index(int(f), shape))
            res.suspects.append(Suspect(idx, float(C[f]), float(expect[f]), 0.0))
            if idx[:-1] not in res.suspect_rows:
                res.suspect_rows.append(idx[:-1])
        res.message = f"K = 0 but {bad.size} element(s) of c are not the empty sum"
        if repair:
            vals = [((s.index[:-2], s.index[-2], s.index[-1]), s.expected) for s in res.suspects]
            res.repaired = ops.set_elements(p.c, vals, inplace=(repair == "inplace"))
    else:
        res.message = "K = 0 and c is the empty sum"


def check_product(a, b, c, *, accumulate: str, output_format: str,
                  false_alarm: float = DEFAULT_FALSE_ALARM, seed: Optional[int] = None,
                  rounds: int = 1, bound: str = "probabilistic") -> FreivaldsResult:
    """Measurement protocol for the C-PRC-01 matmul contract at large shapes.

    Same check as :func:`verify`, with the accumulator and output format
    declared explicitly (the contract states them; the arrays may be float64
    holding values of narrower formats).  ``result.passed`` is the verdict,
    ``result.ratio`` the measured error relative to the allowed bound.
    """
    return verify(a, b, c, rounds=rounds, seed=seed, accumulate=accumulate,
                  output_format=output_format, false_alarm=false_alarm, bound=bound)
