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
import math
import os
import sys
import threading
import time
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..errors import UsageError
from ..formats import get_format, round_to
from . import _model as model
from . import _cblas, _mkl, _tensorguards
from ._backend import (_NP_NAMES, NUMPY_FORMATS, NUMPY_OPS, aligned_empty, ops_for, scratch,
                       sub_index)
from ._screen import (SAMPLE_ROWS, SMALL_ROWS, Projection, group_of, rademacher,  # noqa: F401
                      ratio_rows, residual, row_relief, row_scales, screen, signs, stage1)
from ._screen import (_M64, MIN_K_FROM_Y, ROW_RELIEF_MIN, SEED_END, Screen, _fastc,
                      batch_screen, scale_from_stats, screen_one, screen_plan, stage1_matvec)

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
    reason: str  # verified | corrupted | nonfinite | empty | empty-sum | shape (guard)
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
    bias_src: Any = None  # the bias vector as given (N,)
    groups: int = 1  # column groups of the stage-1 residual
    deterministic: bool = False  # worst-case element bounds
    b_rms: Any = None  # rms_k ||B_k|| when known (the guard's cache)
    y: Any = None  # B r of the first round (estimates rms_k ||B_k||)
    _bias64: Optional[np.ndarray] = None

    @property
    def bias(self) -> Optional[np.ndarray]:
        """The bias as host float64 (N,), converted on first use."""
        if self.bias_src is None:
            return None
        if self._bias64 is None:
            self._bias64 = self.ops.take(self.bias_src, ())
        return self._bias64


def _as_arrays(a, b, c):
    ops = ops_for(a, b, c)
    if ops is None:
        raise UsageError("a, b and c must be all numpy arrays or all torch tensors")
    if ops is NUMPY_OPS:
        if not (type(a) is type(b) is type(c) is np.ndarray):
            a, b, c = (np.asarray(x) for x in (a, b, c))
    else:
        if not (a.device == b.device == c.device):
            devs = {str(x.device) for x in (a, b, c)}
            raise UsageError(f"a, b and c are on different devices: {sorted(devs)}")
        # a negative view's memory is not its values: read the values
        a, b, c = (x.resolve_neg() if x.is_neg() else x for x in (a, b, c))
    return a, b, c, ops


_FORMAT_ERROR = ("{name} has unsupported dtype {dt}; supported: float64, float32, float16, "
                 "bfloat16, float8_e4m3fn, float8_e5m2")


@functools.lru_cache(maxsize=256)
def _formats(fa: str, fc: str, accumulate: Optional[str], output_format: Optional[str]):
    """(operand format, accumulator, output format, check precision) of a call."""
    op_fmt = get_format(fa)
    if accumulate is None:
        accumulate = "float64" if fa == "float64" else "float32"
    acc = get_format(accumulate)
    out = get_format(output_format if output_format is not None else fc)
    cname = "float64" if "float64" in (fa, fc) else "float32"
    return op_fmt, acc, out, cname


def _problem(a, b, c, accumulate, output_format, bias=None) -> _Problem:
    a, b, c, ops = _as_arrays(a, b, c)
    sa, sb, sc = ops.shape(a), ops.shape(b), ops.shape(c)
    for name, s in (("a", sa), ("b", sb), ("c", sc)):
        if len(s) < 2:
            raise UsageError(f"{name} must have at least 2 dimensions (..., rows, cols); "
                             f"got shape {s}")
    M, K = sa[-2:]
    K2, N = sb[-2:]
    if K != K2:
        raise UsageError(f"inner dimensions differ: a is {sa} and b is {sb} ({K} != {K2})")
    if len(sa) == 2 and len(sb) == 2:
        batch = ()
    else:
        try:
            batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
        except ValueError:
            raise UsageError(f"batch dimensions of a {sa[:-2]} and b {sb[:-2]} do not "
                             "broadcast") from None
    if sc != batch + (M, N):
        raise UsageError(f"c has shape {sc}; a @ b has shape {batch + (M, N)}")
    fa, fb, fc = ops.format_name(a), ops.format_name(b), ops.format_name(c)
    if fa is None or fb is None or fc is None:
        for name, x, f in (("a", a, fa), ("b", b, fb), ("c", c, fc)):
            if f is None:
                raise UsageError(_FORMAT_ERROR.format(name=name, dt=ops.dtype_str(x)))
    if fa != fb:
        raise UsageError(f"dtype mismatch: a is {fa} and b is {fb}; cast one operand so "
                         "both have the dtype the product was computed from")
    op_fmt, acc, out, cname = _formats(fa, fc, accumulate, output_format)
    if bias is not None:
        if ops_for(bias, a) is None:
            raise UsageError("bias must be of the same kind (numpy / torch) as a, b and c")
        if ops is NUMPY_OPS:
            bias = np.asarray(bias)
        if tuple(ops.shape(bias)) != (N,) or ops.format_name(bias) is None:
            raise UsageError(f"bias must be a float vector of length N={N}; got shape "
                             f"{tuple(ops.shape(bias))} and dtype {ops.dtype_str(bias)}")
    return _Problem(a, b, c, ops, batch, sa[:-2], sb[:-2], M, K, N, op_fmt,
                    acc, out, ops.compute_dtype(cname), cname, bias)


def _units(p: _Problem) -> model.Units:
    return _units_for(p.acc.name, p.out.name, p.cname)


@functools.lru_cache(maxsize=64)
def _units_for(acc_name: str, out_name: str, check_name: str) -> model.Units:
    acc, out = get_format(acc_name), get_format(out_name)
    return model.Units(acc=acc.u, out=out.u, check=get_format(check_name).u,
                       recompute=2.0 ** -53, acc_tiny=acc.smallest_subnormal / 2,
                       out_tiny=out.smallest_subnormal / 2)


_ENTROPY = threading.local()


def fresh_seed() -> int:
    """A fresh 63-bit seed from OS entropy, read 4 KiB at a time (one system call per 512
    seeds: right after a large product a system call is slow next to a small check)."""
    st = _ENTROPY.__dict__
    buf, pos = st.get("buf"), st.get("pos", 0)
    if buf is None or pos >= len(buf):
        buf, pos = os.urandom(4096), 0
        st["buf"] = buf
    st["pos"] = pos + 8
    return int.from_bytes(buf[pos:pos + 8], "little") >> 1


# ---------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------

def verify(a, b, c, *, rounds: int = 1, seed: Optional[int] = None,
           accumulate: Optional[str] = None, output_format: Optional[str] = None,
           false_alarm: float = DEFAULT_FALSE_ALARM, max_rows: int = DEFAULT_MAX_ROWS,
           localize: bool = True, repair: bool | str = False, bias=None,
           groups: int = 1, bound: str = "probabilistic", _pre=None,
           _resume: Optional[float] = None) -> FreivaldsResult:
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
    # (_resume: the start of verify's compiled front, whose common call did not pass the
    # product with ``seed``: the check goes on from there, as after _common below)
    t0 = _clock() if _resume is None else _resume
    handed = None  # a screen the compiled common call hands over
    if _resume is None and (seed is None or type(seed) is int and 0 <= seed <= _M64) \
            and rounds == 1 and groups == 1 and false_alarm == DEFAULT_FALSE_ALARM \
            and bias is None and _pre is None and accumulate is None and output_format is None \
            and repair is False and bound == "probabilistic" and _COMMON is not None \
            and type(rounds) is int and type(groups) is int:
        res = _common(a, b, c, seed, max_rows)
        if type(res) is _Passed or type(res) is FreivaldsResult:
            res.seconds = _clock() - t0
            return res
        # not the common call (None), or a row beyond its screen: (the seed used, and the
        # screen where the call hands it over, else the same seed's check again)
        if res is not None:
            seed, handed = res
    if type(a) is not np.ndarray or type(b) is not np.ndarray or type(c) is not np.ndarray:
        a, b, c, bias = _plain(a), _plain(b), _plain(c), _plain(bias)
    if type(rounds) is not int or type(groups) is not int or rounds < 1 or groups < 1 \
            or type(false_alarm) is not float or not 0.0 < false_alarm < 1.0 \
            or repair is not False or bound != "probabilistic":
        _check_options(rounds, false_alarm, repair, bound, groups)
    pfa = float(false_alarm)
    if handed is not None:
        scr = handed
    elif rounds == 1 and groups == 1 and bound == "probabilistic" \
            and accumulate is None and output_format is None and (seed is None or (
                type(seed) is int and 0 <= seed < SEED_END)):
        seed = fresh_seed() if seed is None else seed
        res = _fast(a, b, c, seed, pfa, bias, _pre)
        if type(res) is _Passed or type(res) is FreivaldsResult:
            res.seconds = time.perf_counter() - t0
            return res
        scr = res  # a batch's screen with a row beyond it, or None
    else:
        scr = None
    if groups > 1 and _pre is not None:
        raise UsageError("groups > 1 cannot use a cached weight vector")
    p = _problem(a, b, c, accumulate, output_format, bias)
    if groups > 1:
        p.groups = int(min(groups, max(p.N, 1)))
    elif p.N < NARROW and _pre is None:
        # a narrow product: one residual per column (its cost is still a pass over A), so
        # no fault spread over a row cancels out of it, whatever the signs
        p.groups = max(p.N, 1)
    p.deterministic = bound == "deterministic"
    if seed is None:
        seed = fresh_seed()
    elif not isinstance(seed, (int, np.integer)) or not 0 <= seed < SEED_END:
        raise UsageError(f"seed must be an integer in [0, 2**128), got {seed!r}")
    else:
        seed = int(seed)
    res = FreivaldsResult(
        passed=True, reason="verified", suspect_rows=[], suspects=[],
        threshold=_ZERO, ratio=0.0,
        false_alarm=0.0 if p.deterministic else pfa, screen_ratio=0.0,
        shape=(p.batch, p.M, p.K, p.N), operand_format=p.op_fmt.name, accumulate=p.acc.name,
        output_format=p.out.name, check_precision=p.cname, rounds=int(rounds),
        groups=p.groups, bound=bound, seed=seed, backend=p.ops.name)
    items = math.prod(p.batch)
    with p.ops.exact_mode():
        if items * p.M * p.N == 0:
            res.threshold = np.zeros(p.batch)
            res.reason, res.message = "empty", "empty product: nothing to verify"
        elif p.K == 0:
            res.threshold = np.zeros(p.batch)
            _check_empty_sum(p, res, repair)
        else:
            _verify(p, res, int(rounds), seed, pfa, max(0, int(max_rows)), localize, repair,
                    _pre, scr)
    res.seconds = time.perf_counter() - t0
    return res


def _plain(x):
    """A torch tensor of a subclass as the plain tensor of its memory: the check then
    calls no method of the subclass, which could show it other values than the ones
    stored (a plain tensor, an array or anything else: as it is)."""
    torch = sys.modules.get("torch")
    if torch is None or type(x) is torch.Tensor or not isinstance(x, torch.Tensor):
        return x
    with torch._C.DisableTorchFunctionSubclass():
        return torch.Tensor.as_subclass(x, torch.Tensor)


#: products with fewer columns than this are checked with one residual per column
NARROW = 16
_ZERO = np.zeros(())
_ZERO.flags.writeable = False
_clock = time.perf_counter
#: the compiled common call (see _fastc.c: one C-contiguous float32 / float64 product of
#: numpy arrays, default options), where the helper is built
_COMMON = getattr(_fastc, "common", None)
_COMMON_PTR = getattr(_fastc, "common_ptr", None)
_COMMON_BATCH = getattr(_fastc, "common_batch", None)


#: 16-bit operands' dtypes -> the compiled common call's ``half`` (1 bfloat16, 2 float16)
_HALF_NP: dict = {}
_HALF_TORCH: dict = {}
#: the compiled common call's kinds without a plan (no BLAS function for them)
_NO_PLAN: set = set()


def _common(a, b, c, seed=None, max_rows=0):
    """verify's common call through ``_fastc.common`` (one 2-D C-contiguous product of numpy
    arrays or CPU tensors, float32 / float64, or bfloat16 / float16 operands with C in
    their format or float32; default options; ``seed``: the caller's, or None for a fresh
    one; ``max_rows``: verify's, for a batch's float64 look in the call): its passing
    result, else the seed it used (a row beyond the screen: the caller checks again with
    it), or None where it does not apply."""
    if type(a) is np.ndarray:
        if type(b) is not np.ndarray or type(c) is not np.ndarray:
            return None
        if a.ndim > 2:
            return _common_batch(a, b, c, 0, seed, max_rows)
        dt = a.dtype
        # (the usual dtypes by identity: a dtype's hash is computed each time, a few steps
        # from cold caches right after a product; any other through the table)
        half = 0 if dt is _F32 or dt is _F64 else 1 if dt is _BF16 else 2 if dt is _F16 \
            else _HALF_NP.get(dt, 0) if _HALF_NP else _half_tables()[0].get(dt, 0)
        if half:
            # (c of the operands' format or float32: the compiled call takes 16-bit arrays
            # without their format -- a view costs microseconds right after a product -- and
            # would read any other 2-byte c as the operands' bits, a 4-byte one as float32)
            if b.dtype != dt or c.dtype != dt and c.dtype != _F32:
                return None
            out = _COMMON(a, b, c, half, 0, seed)
        else:
            out = _COMMON(a, b, c, 0, 0, seed)
    else:
        torch = sys.modules.get("torch")
        if torch is None or type(a) is not torch.Tensor or type(b) is not torch.Tensor \
                or type(c) is not torch.Tensor:
            return None
        for check, args in _SHAPES:  # (tensors like a shape taken twice: no property reads)
            if check(a, b, c):
                break
        else:
            args = _tensor_args(torch, a, b, c)
            if args is None:
                return None
            if args is _BATCH:
                try:  # a batch of strided views (attention's q, k^T, v of a fused projection)
                    return _common_batch(a.numpy(), b.numpy(), c.numpy(), 1, seed, max_rows)
                except (RuntimeError, TypeError):  # a tensor numpy cannot view
                    return None
            _remember_shape(a, b, c, args)
        # contiguous CPU tensors of checked formats and shapes, read at their addresses (one
        # call into torch each; a numpy view costs tens of microseconds right after a
        # product)
        out = _COMMON_PTR(a.data_ptr(), b.data_ptr(), c.data_ptr(), *args, 1, seed)
    if out is None or type(out) is _Passed:  # (the compiled call makes the passing result
        return out  # as _passing does: see _fastc.set_passed below)
    if len(out) == 7:  # the shape's first call: its plan, then the call again
        if out in _NO_PLAN or not _common_plan(*out):
            _NO_PLAN.add(out)
            return None
        return _common(a, b, c, seed, max_rows)
    return out[0], None  # (the seed: a row beyond the screen, checked again with it)


#: shapes of CPU tensors verify's common call has taken twice: (TensorGuards(a, b, c).check,
#: the compiled call's (M, K, N, half, citem)), the latest first; and the arguments of those
#: seen once, the latest SEEN_KEPT (see _tensorguards)
_SHAPES: tuple = ()
_SEEN: dict = {}
SHAPES_KEPT, SEEN_KEPT = 4, 16
_BATCH = object()  # (_tensor_args: a batch of matrices)


def _remember_shape(a, b, c, args: tuple) -> None:
    """After the common call's property reads took tensors a, b, c: the second time the
    same call arguments (shapes and formats) are seen, a TensorGuards of the tensors is
    kept in _SHAPES (at most SHAPES_KEPT), so that the next like them are taken without
    the reads."""
    global _SHAPES
    if _SEEN.pop(args, None) is None:
        if len(_SEEN) >= SEEN_KEPT:
            _SEEN.pop(next(iter(_SEEN)))
        _SEEN[args] = True
        return
    TG = _tensorguards.tensor_guards()
    if TG is False:
        return
    try:
        check = _tensorguards.shape_guard(TG, (a, b, c)).check
    except Exception:  # (tensors it does not take: the properties are read each time)
        return
    _SHAPES = ((check, args),) + _SHAPES[:SHAPES_KEPT - 1]


def _tensor_args(torch, a, b, c):
    """What :func:`_common` takes of exact torch tensors, each property read by its own
    call: the compiled call's (M, K, N, half, citem) for one C-contiguous CPU product of
    its formats, _BATCH for a float32 / float64 batch, None for anything else."""
    if not (a.is_cpu and b.is_cpu and c.is_cpu) \
            or a.is_neg() or b.is_neg() or c.is_neg():  # (memory that is not the value)
        return None
    dt = a.dtype
    half = (_HALF_TORCH or _half_tables()[1]).get(dt)
    if half is None or b.dtype is not dt:
        return None
    sa, sb, sc = a.shape, b.shape, c.shape
    if len(sa) > 2:
        return _BATCH if not half and c.dtype is dt else None
    if not (a.is_contiguous() and b.is_contiguous() and c.is_contiguous()):
        return None
    if len(sa) != 2 or len(sb) != 2 or len(sc) != 2 or sb[0] != sa[1] \
            or sc[0] != sa[0] or sc[1] != sb[1]:
        return None
    citem = c.element_size() if c.dtype is dt else 4 if c.dtype is torch.float32 \
        and half else 0
    return (sa[0], sa[1], sb[1], half, citem) if citem else None


def _common_batch(a, b, c, backend: int, seed=None, max_rows=0):
    """:func:`_common` for a batch (host arrays) through ``_fastc.common_batch``: the
    passing result, the seed drawn (a row beyond the screen), or None.  ``max_rows``:
    where at most this many rows are left beyond their own noise, the call recomputes
    them in float64 (the general path's stage 2) and passes the batch where they are
    within their element bounds."""
    if _COMMON_BATCH is None:
        return None
    # (verify's max_rows clamped: the compiled call takes a C size; only a batch reads it,
    # so a single product's call does not pay for these steps right after its product)
    max_rows = min(max(max_rows, 0), 1 << 30) if type(max_rows) is int else 0
    out = _COMMON_BATCH(a, b, c, backend, seed, ROW_RELIEF_MIN, max_rows)
    if out is None:
        return None
    if type(out[0]) is tuple:  # the shape's first call: its plan, then the call again
        if out in _NO_PLAN or not _common_batch_plan(*out):
            _NO_PLAN.add(out)
            return None
        out = _COMMON_BATCH(a, b, c, backend, seed, ROW_RELIEF_MIN, max_rows)
        if out is None or type(out[0]) is tuple:
            return None
    seed, ratio = out[0], out[1]
    batch, shape, fmts, name = out[4]
    if ratio is not None and (ratio <= 1.0 or len(out) == 7):
        res = _passing(out[2], out[3], ratio, True, shape, fmts, seed, DEFAULT_FALSE_ALARM,
                       name, True)
        if len(out) == 6:  # rows beyond the screen, each within its own noise
            res.screen_ratio = out[5]
            res.message = _RELIEVED
        elif len(out) == 7:  # rows beyond their own noise, within their element bounds
            res.screen_ratio = out[5]
            res.screened_rows = [tuple(int(v) for v in np.unravel_index(t, batch)) + (i,)
                                 for t, i in out[6]]
            res.message = f"{len(out[6])} row(s) screened, all within the element bounds"
        return res
    if len(out) == 8:  # a row beyond the screen: batch_screen's Screen, for the general path
        M, K = shape[1], shape[2]
        items = math.prod(batch)
        y = np.frombuffer(out[6], dtype=np.float32 if fmts[0] == "float32" else np.float64)
        # (the rows' ratios after the second look, where it was made: row_relief's)
        rows = None if out[7] is None else np.frombuffer(out[7]).reshape(items, M).copy()
        return seed, Screen(np.frombuffer(out[5]).reshape(items, M).copy(), np.array(out[2]),
                            np.array(out[3]), True, ratio, False,
                            y.reshape(batch + (K,)).copy(), rows=rows)
    return seed, None


def _common_batch_plan(batch: tuple, M: int, K: int, N: int, item: int, backend: int) -> bool:
    """Register ``_fastc.common_batch``'s plan for one batch shape: the screen's plan and
    constants of :func:`._screen.batch_screen`; False where that does not take the batch
    (too few rows, a short K or N) or the BLAS function is not there."""
    items = math.prod(batch)
    if M < model.MIN_CALIBRATION_ROWS or K < MIN_K_FROM_Y or N < 16 or items * M <= SMALL_ROWS:
        return False
    name = "float32" if item == 4 else "float64"
    fn = _cblas.for_arrays(backend == 0).get(name, 0)
    if not fn:
        return False
    _cblas.pool_for(backend == 0)  # (the back end's threads: MKL's matrices on torch's,
    # the helper's own float32 products of numpy's on OpenBLAS's)
    units = _units_for(name, name, name)
    alpha, beta = model.screen_cap_coefficients(K, N, units)
    k9 = int(0.9 * M) if M >= model.TAIL_CALIBRATION_ROWS else -1
    pfa = DEFAULT_FALSE_ALARM  # (the call's only false-alarm rate)
    # float32 batches: the float64 look's constants, as _verify's stage 2 derives them (a
    # float64 product's look stays with the general path: there the recomputation's own
    # rounding is of the size of the errors it measures, so only numpy's order of the
    # sums gives the general path's ratios)
    exact = None if item != 4 else (
        units.acc, units.out, units.recompute, units.acc_tiny, units.out_tiny,
        model.element_log_term(items * M * N, pfa / 2),
        math.log(max(items * M, 1) / (pfa / 2)), units.acc <= 2.0 ** -53)
    _fastc.common_batch_plan(fn, _cblas.for_arrays(backend == 0)["ilp64"], batch, M, K, N,
                             item, backend, SAMPLE_ROWS, M // 2, k9, float(alpha), float(beta),
                             float(model.CAP_SLACK), model.MEDIAN_ABS_NORMAL,
                             model.MEDIAN_ABS_NORMAL / model.Q90_ABS_NORMAL,
                             float(model.FLOOR_FRACTION), float(model.LAMBDA_SCREEN),
                             (batch, (batch, M, K, N), (name,) * 4,
                              "numpy" if backend == 0 else "torch"), exact)
    return True


def _half_tables() -> tuple:
    """The dtype tables of :func:`_common` (torch's where torch is loaded), made once."""
    _HALF_NP.update({_BF16: 1, _F16: 2})
    torch = sys.modules.get("torch")
    if torch is not None:
        _HALF_TORCH.update({torch.float32: 0, torch.float64: 0, torch.bfloat16: 1,
                            torch.float16: 2})
    return _HALF_NP, _HALF_TORCH


def _common_plan(M: int, K: int, N: int, item: int, half: int, citem: int,
                 backend: int) -> bool:
    """Register the compiled common call's plan for one shape and kind: the stage-1 buffers
    and the screen's plan and constants (those of :func:`_fast_compiled`'s and
    :func:`_fast_compiled16`'s plans and :func:`._screen.scale_from_stats`).  False where
    the BLAS function it needs is not there."""
    fns = _cblas.for_arrays(backend == 0)
    if half:
        name = "bfloat16" if half == 1 else "float16"
        out_name = name if citem == 2 else "float32"
        r, y, z, w, buf, k, rows, kmed, k9, _, coef = _compiled_plan16(M, K, N, out_name)
        fmts = (name, "float32", out_name, "float32")
        fn = fns.get("float32", 0) if citem == 4 else 0
        if citem == 4 and not fn:
            return False
    else:
        dt = _F32 if item == 4 else _F64
        name = _NP_NAMES[dt]
        r, y, z, w, buf, k, rows, kmed, k9, _, _, coef = _compiled_plan(M, K, N, dt, name)
        fmts = (name,) * 4
        fn = fns.get(name, 0)
        if not fn:
            return False
    pool = _POOL(backend == 0)  # (the threads of the helper's own products)
    # its own buffers (the stage-1 plans' are shared with the other paths' calls), aligned
    # as theirs (see aligned_empty)
    r, y, z, w, buf = (aligned_empty(v.shape, v.dtype) for v in (r, y, z, w, buf))
    _fastc.common_plan(fn, fns.get("ilp64", 0), r, y, z, w, buf, M, K, N, item, k, rows,
                       kmed, k9, model.MIN_CALIBRATION_ROWS, MIN_K_FROM_Y, half, citem,
                       backend, pool, float(coef[0]), float(coef[1]),
                       float(model.CAP_SLACK), model.MEDIAN_ABS_NORMAL,
                       model.MEDIAN_ABS_NORMAL / model.Q90_ABS_NORMAL,
                       float(model.FLOOR_FRACTION), float(model.LAMBDA_SCREEN),
                       (((), M, K, N), fmts, "numpy" if backend == 0 else "torch"))
    return True


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_POOL = _cblas.pool_for  # the helper's own products on the back end's own threads


_BF16, _F16 = NUMPY_FORMATS["bfloat16"], NUMPY_FORMATS["float16"]
#: (a's dtype, c's dtype) -> (operand format, check precision); a and b must agree.
_FAST_KINDS = {(_F32, _F32): ("float32", "float32"), (_F64, _F64): ("float64", "float64")}
for _op in (_BF16, _F16):
    for _out in (_op, _F32):
        _FAST_KINDS[(_op, _out)] = (_NP_NAMES[_op], "float32")


#: the CPU tensors' back end, once made
_CPU_TORCH: list = []
#: torch dtype -> True (numpy reads it: float32, float64) or the numpy dtype of its bits
_TORCH_VIEWS: dict = {}


def _cpu_torch_ops(c):
    """The back end of CPU tensors (made once; the common call's path skips ops_for)."""
    ops = ops_for(c)
    torch = ops.torch
    _TORCH_VIEWS.update({torch.float32: True, torch.float64: True, torch.bfloat16: _BF16,
                         torch.float16: _F16})
    _CPU_TORCH.append(ops)
    return ops


def _fast(a, b, c, seed: int, pfa: float, bias=None, pre=None) -> Optional[FreivaldsResult]:
    """The common call in few operations: one product of 2-D float32 / float64 matrices, or
    of bfloat16 / float16 operands with a C of their format or float32 (numpy arrays, or
    CPU torch tensors, read through detach and host views), one round, default formats; a
    torch call may carry a bias vector and the guard's cached weight projection (``pre``).

    It computes exactly what the general path computes first -- the signs of ``seed`` (or
    the cached projection), y = B r, z = A y, w = C r through the same back-end products,
    the residual, the row scales and the calibrated screen (the same functions) -- and
    returns the result when every row clears the screen.  A batch of matrices goes to
    :func:`_fast_batch`.  Where a row is beyond the screen it returns the
    :class:`Screen` the general path's stage 1 would have made (the general path takes it
    from there: the per-row look and the float64 recomputation); anything else (a
    non-finite residual, a layout or dtype the compiled passes do not read, a bias on
    numpy arrays) returns None, and the general path starts afresh.  The verdicts are the
    general path's, only its fixed cost is gone (no problem object, no per-call validation
    beyond what the arrays' own types guarantee)."""
    if type(a) is np.ndarray:
        if type(b) is not np.ndarray or type(c) is not np.ndarray or bias is not None \
                or pre is not None:
            return None
        ah, bh, ch = a, b, c
        ops = NUMPY_OPS
        torch = None
    else:
        torch = sys.modules.get("torch")
        if torch is None or not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                                 and isinstance(c, torch.Tensor)):
            return None
        # parameters and tensors that require grad: their values, outside autograd (as the
        # general path reads them under no_grad); subclasses are plain tensors by now
        # (verify's _plain)
        T = torch.Tensor
        if type(a) is not T or a.requires_grad:
            a = a.detach()
        if type(b) is not T or b.requires_grad:
            b = b.detach()
        if type(c) is not T or c.requires_grad:
            c = c.detach()
        if type(a) is not T or type(b) is not T or type(c) is not T \
                or not (a.is_cpu and b.is_cpu and c.is_cpu) \
                or a.is_neg() or b.is_neg() or c.is_neg():  # (the general path resolves them)
            return None
        if bias is not None:
            if type(bias) is not torch.Tensor and not isinstance(bias, torch.Tensor):
                return None
            bias = bias.detach()
            if type(bias) is not torch.Tensor or bias.dtype != c.dtype \
                    or bias.device.type != "cpu":
                return None
        ops = _CPU_TORCH[0] if _CPU_TORCH else _cpu_torch_ops(c)
        dt = a.dtype
        if dt is not b.dtype:
            return None
        # host views, directly (each call into torch right after a large product runs from
        # cold caches: the fewer, the better): 16-bit tensors as their bits
        view = _TORCH_VIEWS.get(dt)
        if view is None:
            return None
        ah, bh = (a.numpy(), b.numpy()) if view is True else \
            (a.view(torch.int16).numpy().view(view), b.view(torch.int16).numpy().view(view))
        cv = view if c.dtype is dt else _TORCH_VIEWS.get(c.dtype)
        if cv is True:
            ch = c.numpy()
        elif cv is not None:
            ch = c.view(torch.int16).numpy().view(cv)
        else:
            return None
    if ah.ndim != 2 or bh.ndim != 2 or ch.ndim != 2:
        if ah.ndim > 2 and bias is None and pre is None:
            return _fast_batch(ah, bh, ch, seed, pfa, torch is None)
        return None
    M, K = ah.shape
    N = bh.shape[1]
    if bh.shape[0] != K or ch.shape != (M, N) or M == 0 or K < 64 or N < 64 \
            or ah.dtype != bh.dtype:
        return None
    kind = _FAST_KINDS.get((ah.dtype, ch.dtype))
    if kind is None:
        return None
    name, cname = kind
    narrow = cname != name
    if narrow and not (_fastc is not None or _mkl.available(ah.dtype)):
        return None
    if bias is not None and tuple(bias.shape) != (N,):
        return None
    cdt = ops.compute_dtype(cname)
    pr = None
    if pre is not None:
        pr = pre(_Shim(a=a, b=b, c=c, ops=ops, M=M, K=K, N=N), cdt)
    if _fastc is not None:  # one compiled call
        zoff = 0.0  # a bias's b . r, with this call's signs (the compiled call draws the same)
        if bias is not None:
            zoff = float(ops.take(bias, ()) @ (pr.r if pr is not None else signs(
                seed, 0, N, np.float32 if cname == "float32" else np.float64)))
        if narrow:  # the helper's 16-bit kernel
            res = _fast_compiled16(ah, bh, ch, M, K, N, seed, pfa, torch is None, pr, zoff, ops)
        elif torch is None:  # numpy's BLAS
            res = _fast_compiled(a, b, c, M, K, N, name, seed, pfa, _cblas.gemv())
        else:  # torch.mv's MKL
            res = _fast_compiled(ah, bh, ch, M, K, N, name, seed, pfa, _cblas.mkl_gemv(),
                                 "torch", *((pr.r, ops.host_view(pr.y), pr.b_rms)
                                            if pr is not None else ()), zoff=zoff)
        if res is not False:
            return res
    brms = None  # rms_k ||B_k||: the guard's cache knows it, else the screen reads it off y
    if pr is not None:
        rd, yt, r, brms = pr.rd, pr.y, pr.r, pr.b_rms
    else:
        r = signs(seed, 0, N, np.float32 if cname == "float32" else np.float64)
        rd = r if torch is None else torch.from_numpy(r)
        yt = stage1_matvec(ops, b, rd, cdt, host=False)
    if narrow and pr is not None and _fastc is None:  # y's MKL columns, made once
        cols = pr.cols.get(ah.dtype)
        if cols is None:
            cols = pr.cols[ah.dtype] = _mkl.columns(ops.host_view(yt), ah.dtype)
        z = _mkl.matvec(ah, ops.host_view(yt), cols=cols)
        if z is None:
            return None
    else:
        z = stage1_matvec(ops, a, yt, cdt)
    w = stage1_matvec(ops, c, rd, cdt)
    if bias is not None:
        z = z + float(ops.take(bias, ()) @ r)
    # the general path's row scales and calibration (row_scales() and screen() for a single
    # matrix with host views, without its per-item arrays; max |d| from the median's
    # partition)
    op_fmt, acc, out_fmt, _ = _formats(name, _NP_NAMES[ch.dtype], None, None)
    with np.errstate(over="ignore", invalid="ignore"):
        one = screen_one(z, w, ah, ch, None if brms is not None else (
            yt if torch is None else ops.host_view(yt)), brms, seed, M, K, N,
            _units_for(acc.name, out_fmt.name, cname))
    if one is None:
        return None
    d, dmax, scale, calibrated = one
    if not math.isfinite(dmax):
        return None
    return _cleared(dmax, scale, bool(calibrated), M, K, N,
                    (op_fmt.name, acc.name, out_fmt.name, cname), seed, pfa, ops.name, d,
                    ops.host_view(yt) if torch is not None else yt, brms)


def _fast_batch(ah, bh, ch, seed: int, pfa: float, numpy_arrays: bool):
    """:func:`_fast` for a batch of float32 / float64 matrices (host views, one batch shape):
    :func:`._screen.batch_screen`, which the general path's stage 1 uses too.  The passing
    result where every row clears its matrix's threshold; the :class:`Screen` where some
    row does not (the general path takes it from there without repeating stage 1); None
    where the compiled batch does not apply."""
    kind = _FAST_KINDS.get((ah.dtype, ch.dtype))
    if kind is None or kind[0] != kind[1]:
        return None
    name = kind[0]
    scr = batch_screen(ah, bh, ch, seed, _cblas.for_arrays(numpy_arrays),
                       _units_for(name, name, name))
    if scr is None or not scr.clear:
        return scr
    batch, (M, K), N = ah.shape[:-2], ah.shape[-2:], bh.shape[-1]
    return _passing(scr.tau.reshape(batch), scr.scale.reshape(batch), scr.ratio, True,
                    (batch, M, K, N), (name,) * 4, seed, pfa,
                    "numpy" if numpy_arrays else "torch")


def _fast_compiled(a, b, c, M: int, K: int, N: int, name: str, seed: int, pfa: float,
                   fns: Optional[dict], backend: str = "numpy", r=None, y=None,
                   brms: Optional[float] = None, zoff: float = 0.0):
    """:func:`_fast` for C-contiguous float32 / float64 host matrices in one compiled call
    (signs, the three products through the BLAS function the back end's own products call
    -- numpy's ``X @ v``, or torch.mv's MKL -- and the screen's statistics) and a few float
    operations: the same numbers as the general path's products and
    :func:`._screen.screen_one` (the per-shape buffers and constants made once).
    ``r``, ``y``: a cached projection (host views) with its ``brms``; ``zoff``: a bias's
    b . r.  False where the helper or the BLAS function is not there, or the arrays are not
    contiguous; None where the general path must decide."""
    if not fns or not (a.flags.c_contiguous and c.flags.c_contiguous
                       and (y is not None or b.flags.c_contiguous)):
        return False
    dt = a.dtype
    plan = scratch(("stage1", M, K, N, dt), lambda: _compiled_plan(M, K, N, dt, name))
    r0, y0, z, w, buf, k, rows, kmed, k9, units, acc, coef = plan
    given = y is not None
    if given:
        if r.dtype != dt or y.dtype != dt or not (r.flags.c_contiguous and y.flags.c_contiguous):
            return False
        b = y
    else:
        r, y = r0, y0
    i0 = 0 if rows else seed % (M - k + 1)
    dmax, dk, dk9, css, ass, yss = _fastc.stage1(fns[name], fns["ilp64"], a, b, c,
                                                 seed & _M64, seed >> 64, r, y, z, w, buf, i0,
                                                 k, kmed, k9, rows, given, zoff, False,
                                                 _POOL(backend == "numpy"))
    return _compiled_verdict(dmax, dk, dk9, css, ass, yss, brms, k, k9, M, K, N, units,
                             (name, acc, name, name), seed, pfa, backend, buf, y, coef)


def _compiled_verdict(dmax, dk, dk9, css, ass, yss, brms, k, k9, M, K, N, units, fmts, seed,
                      pfa, backend, buf=None, y=None, coef=None):
    """The result of a compiled stage 1 from its six statistics (through
    :func:`._screen.scale_from_stats`, as the general path's screen reads them), its
    :class:`Screen` where a row is beyond it (``buf``: the residual in its first M
    entries; ``y``: B r on the host), or None (the general path decides).  ``fmts``:
    (operand, accumulator, output, check precision) names; ``coef``: the cap's
    coefficients, where the plan keeps them."""
    if not dmax <= math.inf:  # NaN: the general path traces it
        return None
    one = scale_from_stats(M, K, N, k, k9, dmax, dk, dk9, css, ass, yss, brms, units, coef)
    if one is None:
        return None
    return _cleared(dmax, one[2], one[3], M, K, N, fmts, seed, pfa, backend,
                    None if buf is None else buf[:M], y, brms)


def _screen_ratio(dmax: float, scale: float) -> float:
    """max |d| over the screen's threshold LAMBDA_SCREEN x ``scale`` (a row is beyond the
    screen where this exceeds 1)."""
    t = model.LAMBDA_SCREEN * scale
    return dmax / t if t > 0 else (math.inf if dmax > 0 else 0.0)


def _cleared(dmax, scale, calibrated, M, K, N, fmts, seed, pfa, backend, d=None, y=None,
             brms=None):
    """The passing result of a common call whose every row clears the screen (threshold
    LAMBDA_SCREEN x ``scale``); where a row is beyond it, the :class:`Screen` the general
    path's stage 1 would make of the residual ``d`` (the same numbers: the general path
    takes it from there, with B r = ``y`` and rms_k ||B_k|| = ``brms`` as its stage 1
    leaves them), or None without ``d``."""
    t = model.LAMBDA_SCREEN * scale
    ratio = _screen_ratio(dmax, scale)
    if not ratio <= 1.0:
        if d is None or not math.isfinite(ratio):
            return None
        return Screen(np.array(d, dtype=np.float64).reshape(1, M), np.array([t]),
                      np.array([scale]), bool(calibrated), ratio, False,
                      None if y is None else np.array(y), brms)
    return _passing(t, scale, ratio, calibrated, ((), M, K, N), fmts, seed, pfa, backend, True)


def _passing(threshold, scale, ratio, calibrated, shape, fmts, seed, pfa, backend,
             numbers=False):
    """The passing result of a common call (one round, one group, the probabilistic
    bound) whose every row cleared the screen: a :class:`_Passed` holding these arguments,
    its fields made from them when first read (FreivaldsResult(...)'s generated __init__, or
    even a dict of the fields, takes many steps, each from cold caches right after a
    product: 5.5-7.9 against 1.9-2.8 us for this, medians of 300 right after a 512^3
    product).  ``numbers``: threshold and scale are the compiled call's numbers (a float, or
    a tuple per matrix of the batch shape[0]), made arrays on first read.  (The compiled
    common calls of one 2-D product make the same object in C: _fastc's passed_result.)"""
    res = _new_result(_Passed)
    res._v = (threshold, scale, ratio, calibrated, shape, fmts, seed, pfa, backend, numbers)
    res.seconds = 0.0
    return res


class _Passed(FreivaldsResult):
    """A :class:`FreivaldsResult` as :func:`_passing` makes it: the arguments it was given
    in one slot, each field made from them when first read (:class:`_Made`) and kept, the
    fields whose class defaults hold (rounds, groups, bound, message, ...) left to them.
    Reads, writes, ``to_dict`` and ``dataclasses.replace`` / ``asdict`` behave as a
    FreivaldsResult's; ``repr``, copies and pickles are the plain FreivaldsResult's."""

    __slots__ = ("_v", "seconds")

    def _plain(self) -> FreivaldsResult:
        return FreivaldsResult(*(getattr(self, f.name) for f in dataclasses.fields(self)))

    def __repr__(self) -> str:
        return repr(self._plain())

    def __reduce__(self):  # (copies and pickles: the plain result)
        return self._plain().__reduce__()


class _Made:
    """A field of a :class:`_Passed` result: the value written to it, else the one made
    from the result's arguments (``make(v)``) on first read, then kept."""

    __slots__ = ("name", "make")

    def __init__(self, name: str, make):
        self.name, self.make = name, make

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        d = obj.__dict__
        v = d.get(self.name, _UNSET)
        if v is _UNSET:
            v = d[self.name] = self.make(obj._v)
        return v

    def __set__(self, obj, value):
        obj.__dict__[self.name] = value


def _array_of(i: int):
    """threshold (i = 0) or noise_scale (1) of a _Passed result's arguments: the arrays the
    general path gives, made from the compiled call's numbers, or the arrays given"""
    def make(v):
        return np.array(v[i]).reshape(v[4][0]) if v[9] else v[i]
    return make


_UNSET = object()
_new_result = object.__new__
for _name, _make in (("passed", lambda v: True), ("reason", lambda v: "verified"),
                     ("ratio", lambda v: v[2]), ("screen_ratio", lambda v: v[2]),
                     ("calibrated", lambda v: v[3]), ("shape", lambda v: v[4]),
                     ("operand_format", lambda v: v[5][0]),
                     ("accumulate", lambda v: v[5][1]),
                     ("output_format", lambda v: v[5][2]),
                     ("check_precision", lambda v: v[5][3]), ("seed", lambda v: v[6]),
                     ("false_alarm", lambda v: v[7]), ("backend", lambda v: v[8]),
                     ("threshold", _array_of(0)), ("noise_scale", _array_of(1)),
                     *((_n, lambda v: []) for _n in ("suspect_rows", "suspects",
                                                     "screened_rows", "suspect_columns",
                                                     "row_failures"))):
    setattr(_Passed, _name, _Made(_name, _make))

if getattr(_fastc, "set_passed", None) is not None:
    # the common calls' passing results made in the compiled call, as _passing makes them
    _fastc.set_passed(_Passed, _new_result, DEFAULT_FALSE_ALARM)


def _fast_compiled16(a, b, c, M: int, K: int, N: int, seed: int, pfa: float, numpy_arrays: bool,
                     pr, zoff: float, ops):
    """:func:`_fast_compiled` for bfloat16 or float16 operands (C in their format or
    float32): the general path's products (the helper's 16-bit kernel, ``gemv16``: float32
    vectors, float32 accumulation; a float32 C through the back end's BLAS gemv) in one
    compiled call.  ``pr``: the guard's cached projection."""
    c16 = c.dtype == a.dtype
    f16 = a.dtype == _F16
    vfn, iface = 0, 0
    if not c16:
        fns = _cblas.for_arrays(numpy_arrays)
        if not fns:
            return False
        vfn, iface = fns["float32"], fns["ilp64"]
    if not (a.flags.c_contiguous and c.flags.c_contiguous
            and (pr is not None or b.flags.c_contiguous)):
        return False
    name = "float16" if f16 else "bfloat16"
    out_name = name if c16 else "float32"
    plan = scratch(("stage1_16", M, K, N, out_name),
                   lambda: _compiled_plan16(M, K, N, out_name))
    r, y, z, w, buf, k, rows, kmed, k9, units, coef = plan
    given = pr is not None
    if given:
        r, y = host_parts(pr, ops)
    i0 = 0 if rows else seed % (M - k + 1)
    dmax, dk, dk9, css, ass, yss = _fastc.stage1(
        vfn, iface, a.view(np.uint16), y if given else b.view(np.uint16),
        c.view(np.uint16) if c16 else c, seed & _M64, seed >> 64, r, y, z, w, buf, i0, k,
        kmed, k9, rows, given, zoff, f16, _POOL(numpy_arrays))
    brms = pr.b_rms if given and pr.b_rms is not None else None
    return _compiled_verdict(dmax, dk, dk9, css, ass, yss, brms, k, k9, M, K, N, units,
                             (name, "float32", out_name, "float32"), seed, pfa, ops.name,
                             buf, y, coef)


def host_parts(pr, ops=None) -> tuple:
    """A cached projection's r and y = B r as contiguous float32 host arrays (the 16-bit
    and the guard's cached checks read them), made once and kept with it."""
    parts = pr.cols.get("host32")
    if parts is None:
        ops = ops if ops is not None else ops_for(pr.y)
        parts = pr.cols["host32"] = (np.ascontiguousarray(pr.r, dtype=np.float32),
                                     np.ascontiguousarray(ops.host_view(pr.y),
                                                          dtype=np.float32))
    return parts


def _compiled_plan16(M: int, K: int, N: int, out_name: str) -> tuple:
    """The per-shape part of :func:`_fast_compiled16`."""
    k, _, rows, kmed, k9 = screen_plan(M, 0)
    units = _units_for("float32", out_name, "float32")
    return (aligned_empty(N, np.float32), aligned_empty(K, np.float32),
            aligned_empty(M, np.float32), aligned_empty(M, np.float32), np.empty(2 * M),
            k, rows, kmed, k9, units, model.screen_cap_coefficients(K, N, units))


def _compiled_plan(M: int, K: int, N: int, dt, name: str) -> tuple:
    """The per-shape part of :func:`_fast_compiled`: scratch vectors, the screen's plan
    (:func:`._screen.screen_plan`) and the cap's coefficients."""
    k, _, rows, kmed, k9 = screen_plan(M, 0)
    _, acc, out_fmt, _ = _formats(name, name, None, None)
    units = _units_for(acc.name, out_fmt.name, name)
    return (aligned_empty(N, dt), aligned_empty(K, dt), aligned_empty(M, dt),
            aligned_empty(M, dt), np.empty(2 * M), k, rows, kmed, k9, units, acc.name,
            model.screen_cap_coefficients(K, N, units))


@dataclass
class _Shim:
    """What the screen and the guard's cached projection read of a problem: the operands,
    the sizes, the back end, B r and rms_k ||B_k|| when known."""

    a: Any
    b: Any
    c: Any
    ops: Any
    M: int
    K: int
    N: int
    y: Any = None
    b_rms: Any = None
    batch: tuple = ()
    groups: int = 1


def _check_options(rounds, false_alarm, repair, bound, groups) -> None:
    """Raise UsageError for a bad option (the slow path of verify's checks)."""
    if not isinstance(rounds, (int, np.integer)) or isinstance(rounds, bool) or rounds < 1:
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


def _stage1(p: _Problem, rounds: int, seed: int, cdtype, pre=None):
    """z = A (B r), w = C r for each round: host arrays of shape (rounds, batch...,
    M, groups); see :func:`._screen.stage1`."""
    with np.errstate(over="ignore", invalid="ignore"):
        return stage1(p, rounds, seed, cdtype, pre)


def _row_scales(p: _Problem, seed: int, items: int):
    """Row scales per matrix as arrays of shape (items,); see :func:`._screen.row_scales`."""
    cn, sn = row_scales(p, seed, items)
    return np.reshape(cn, (-1,)).astype(np.float64), np.reshape(sn, (-1,)).astype(np.float64)


def _stage1_screen(p: _Problem, res: FreivaldsResult, rounds, seed, pre):
    """Stage 1 and the screen (under one np.errstate); non-finite residuals are
    traced to their operand here."""
    ops = p.ops
    if rounds == 1 and p.groups == 1 and pre is None and p.bias_src is None and p.batch \
            and p.batch_a == p.batch and p.batch_b == p.batch:  # the compiled batch, if it applies
        hv = [ops.host_view(x) for x in (p.a, p.b, p.c)]
        if all(x is not None for x in hv):
            scr = batch_screen(*hv, seed, _cblas.for_arrays(ops is NUMPY_OPS), _units(p))
            if scr is not None:
                return scr
    z, w = stage1(p, rounds, seed, p.cdtype, pre)
    d = residual(z, w)
    dmax = float(d.max())
    if not math.isfinite(dmax):
        zf = np.isfinite(z)
        if not zf.all() or not np.isfinite(w).all():
            for name, x in (("a", p.a), ("b", p.b)):
                if not ops.all_finite(x):
                    pos = ops.nonfinite_positions(x)
                    raise NonFiniteOperandError(
                        f"operand {name} contains NaN or Inf (first at "
                        f"{pos[0] if pos else '?'}); the product has no finite reference "
                        "to verify against")
            if p.bias is not None and not np.isfinite(p.bias).all():
                raise NonFiniteOperandError("bias contains NaN or Inf")
            if not zf.all() or (p.cname == "float32" and ops.all_finite(p.c)):
                # finite operands but the float32 check overflowed: redo it in float64
                p.cdtype, p.cname = ops.compute_dtype("float64"), "float64"
                res.check_precision = "float64"
                z, w = stage1(p, rounds, seed, p.cdtype)
                d = residual(z, w)
                dmax = float(d.max())
    return screen(p, d, rounds, seed, math.prod(p.batch), _units(p), dmax)


def _verify(p: _Problem, res: FreivaldsResult, rounds, seed, pfa, max_rows, localize, repair,
            pre=None, scr=None):
    ops = p.ops
    items = math.prod(p.batch)
    if scr is None:  # else the common call's (the same function of the same seed)
        with np.errstate(over="ignore", invalid="ignore"):
            scr = _stage1_screen(p, res, rounds, seed, pre)
    if p.y is None and scr.y is not None:  # as a stage 1 here would have left them
        p.y = ops.from_host(scr.y, p.cdtype)
    if p.b_rms is None and scr.b_rms is not None:
        p.b_rms = scr.b_rms
    units = _units(p)  # after stage 1, which may have switched to a float64 check
    res.threshold = scr.tau.reshape(p.batch)
    res.noise_scale = scr.scale.reshape(p.batch)
    res.calibrated = scr.calibrated
    res.screen_ratio = scr.ratio
    if scr.clear:
        res.ratio = scr.ratio
        return
    if scr.rows is not None and rounds == 1 and p.groups == 1 and not p.deterministic:
        ratio_rows_ = scr.rows  # the compiled call's second look (row_relief's arithmetic)
    else:
        ratio_rows_ = ratio_rows(p, scr, rounds, items)
        if not p.deterministic:
            with np.errstate(over="ignore", invalid="ignore"):
                ratio_rows_ = row_relief(p, ratio_rows_, units)
    flagged = np.argwhere(ratio_rows_ > 1.0)
    if not len(flagged):
        res.ratio = float(ratio_rows_.max())
        res.message = _RELIEVED
        return
    order = np.argsort(-ratio_rows_[flagged[:, 0], flagged[:, 1]], kind="stable")
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
    # screened rows beyond max_rows: where the recomputed ones failed, the left projection
    # only localises more (with localize); where none did, it decides for them (a product
    # never passes on rows it has not looked at)
    if res.unexamined_rows and (localize or not res.suspect_rows):
        _locate_more(p, res, flagged[max_rows:], units, L_e, seed, fixes)
    if res.suspect_rows:
        res.passed, res.reason = False, "corrupted"
        nonfinite = any(not np.isfinite(s.value) for s in res.suspects)
        if nonfinite:
            res.reason = "nonfinite"
        res.message = (f"{len(res.suspects)} element(s) in {len(res.suspect_rows)} row(s) "
                       "exceed the rounding-error bound")
    elif res.unexamined_rows:
        res.message = (f"{len(flagged)} row(s) screened: {len(examine)} recomputed, all within "
                       f"the element bounds; the other {res.unexamined_rows} checked through "
                       "their suspect columns, all within them")
    else:
        res.message = (f"{len(flagged)} row(s) screened, all within the element bounds")
    if repair and fixes:
        vals = [((ci, i, j), float(round_to(np.float64(v), p.out))) for (ci, i, j), v in fixes]
        res.repaired = ops.set_elements(p.c, vals, inplace=(repair == "inplace"))


_RELIEVED = "no row beyond its own noise after the per-row check"


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


#: verify's compiled front (_fastc.Front): verify(a, b, c) of numpy arrays without options
#: runs the common call with no Python between (verify, _common and _passing's steps in C);
#: every other call, every product its call does not pass, and every call after one of the
#: functions it shortens (below) was replaced in this module is the Python verify above,
#: whose name, docstring and signature (``__wrapped__``) the front carries
_FRONT = getattr(_fastc, "Front", None)
if _FRONT is not None:
    verify = functools.update_wrapper(
        _FRONT(verify, np.ndarray, _BF16, _F16, _F32, _clock, globals(),
               ("_fastc", "_COMMON", "_common", "_clock")), verify)
