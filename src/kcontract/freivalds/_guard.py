"""A PyTorch guard: verify every matmul inside a ``with`` block or decorated function.

    with kcontract.freivalds.guard(sample=1.0, on_fail="raise") as g:
        y = model(x)
    print(g.stats)

Intercepts ``torch.matmul``, ``@``, ``Tensor.matmul``, ``torch.linalg.matmul``, ``mm``,
``bmm``, ``mv``, ``nn.functional.linear`` (hence ``nn.Linear``), ``addmm`` and ``baddbmm``
(where their input is ignored or is a bias row, and alpha a power of two) and two-operand
``torch.einsum`` products through a ``TorchFunctionMode``; fused attention
(``scaled_dot_product_attention``), whose products are not returned, is counted as
skipped.
Each checked call costs one pass over the left operand and one over the output;
for a fixed right operand (a weight, B = W^T in ``linear``) the vector B r is
computed once and cached, keyed on the weight object and its version counter,
so an in-place update of the weight invalidates it.
"""
from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import numpy as np

from ..errors import UsageError
from ._core import (DEFAULT_FALSE_ALARM, FreivaldsResult, NonFiniteOperandError,
                    ProductCheckError, verify)
from . import _backend, _cblas, _core, _tensorguards
from ._screen import ROW_RELIEF_MIN, Projection, b_rms, signs

_GOLDEN = 0x9E3779B97F4A7C15  # the lean checks' seeds: base + n x this (mod 2^62)
_SEED_MASK = 2 ** 62 - 1
_STEP = _GOLDEN & _SEED_MASK  # (the same sequence, one addition a check)
#: Checks from cached weight projections between two draws of a guard's signs (its
#: projections are then made anew with fresh signs at their next use).
REFRESH = 4096
#: Deferred checks (``defer=True``) hold at most this many bytes of inputs and outputs;
#: beyond it a product is checked at once.
DEFER_BYTES = 64 << 20
#: A deferring guard checks a product whose input and output take more than this many
#: bytes at once: the flush reads them again from memory, where right after the product
#: they are in the caches (the output just written, the input just read), and beyond a
#: few rows that costs more than the check's entry from cold caches that deferral saves.
#: Measured on a 2-core Zen 4 (1 MiB L2 a core), decode steps of 16 products of
#: M x 4096 x 4096 through the compiled check_linear, deferred against at once (medians of
#: four alternating measurements in one process): bfloat16 M = 1 (16 KiB) 0.69 against
#: 0.90 of the floor, M = 4 (64 KiB) 0.84 and 0.84, M = 8 (128 KiB) 0.90 and 0.99, M = 16
#: (256 KiB) 1.22 and 0.92; float32 M = 1 0.88 and 0.83, M = 4 (128 KiB) 0.86 and 0.88,
#: M = 8 0.94 and 0.89, M = 16 (512 KiB) 0.85 and 0.86; bfloat16 16 x 14336 x 4096
#: (576 KiB) 1.12 and 0.98.  These with the records still made by the Python method; since
#: the compiled call records them, M = 1 deferred 0.76 against 0.79 at once (float32) and
#: 0.62 against 0.76 (bfloat16); the larger sizes not measured again.  (Before check_linear
#: was compiled the line was at 2 MiB, with outputs of more than 256 KiB checked at once:
#: M = 1 at once then cost 1.0-1.3.)
DEFER_PRODUCT_BYTES = 128 << 10
_TORCH = None  # torch, once a guard needs it (see _torch)
_clock = time.perf_counter
#: the lean linear check's formats: a tensor dtype -> (the check's compute dtype, name,
#: the compiled check's ``half``)
_LEAN: dict = {}
#: the compiled linear check (``_fastc.linear``), where the helper is built
_LINEAR = getattr(_core._fastc, "linear", None)
#: the compiled remembered linear check (``_fastc.lean``)
_LEAN_C = getattr(_core._fastc, "lean", None)
_FNS: dict = {}  # torch's MKL gemv (what torch.mv calls), once looked up


def _mkl_fns() -> dict:
    global _FNS
    _FNS = _cblas.mkl_gemv()
    return _FNS

LOG = logging.getLogger("kcontract.freivalds")
ON_FAIL = ("raise", "warn", "log")
#: Cached weight vectors kept per guard.
CACHE_SIZE = 256


class ProductCheckWarning(RuntimeWarning):
    """Issued by a guard with ``on_fail="warn"``."""


@dataclass
class GuardStats:
    """Counters of a guard."""

    calls: int = 0  # intercepted matmul calls
    checked: int = 0  # calls verified
    failed: int = 0  # calls that failed verification
    sampled_out: int = 0  # calls skipped by sampling
    skipped: int = 0  # calls not checkable (non-finite operands, unsupported dtype)
    cache_hits: int = 0  # checks that reused a cached weight vector
    errors: int = 0  # internal errors of the checker (logged, never raised)
    seconds: float = 0.0  # time spent checking
    failures: list = field(default_factory=list)  # (op name, message), the last 100
    #: per intercepted op ("linear", "matmul", "bmm", ...): [checks, seconds checking,
    #: checks with a screened row, their seconds]
    by_op: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["failures"] = list(self.failures)
        d["by_op"] = {k: {"checked": v[0], "seconds": v[1], "screened": v[2],
                          "screened_seconds": v[3]} for k, v in self.by_op.items()}
        return d


#: sampled elements of a cached CPU weight whose bytes must still be the same at each use
#: of its projection (writes through ``.data`` or a numpy view keep the version counter)
PRINT_ELEMENTS = 8
_PEEK = getattr(_core._fastc, "peek", None)


def _print_of(src, address: int, shape, stride, rng) -> Optional[tuple]:
    """The fingerprint of a CPU tensor's values (its address, shape and strides given, as
    the caller holds them): (the byte offsets of PRINT_ELEMENTS sampled elements from the
    address as native int64 bytes, the item size, their bytes now); None off the CPU, for
    an empty tensor or without the compiled helper."""
    if _PEEK is None or not src.is_cpu or src.numel() == 0:
        return None
    flat = rng.integers(0, src.numel(), PRINT_ELEMENTS)
    off = np.zeros(PRINT_ELEMENTS, dtype=np.int64)
    for i, st in zip(np.unravel_index(flat, tuple(shape)), tuple(stride)):
        off += i.astype(np.int64) * st
    item = src.element_size()
    off = (off * item).tobytes()
    return off, item, _PEEK(address, off, item)


class _WeightCache:
    """B r for fixed right operands, keyed on the tensor object and its version, and for
    CPU tensors a fingerprint of sampled elements' bytes (see :func:`_print_of`)."""

    def __init__(self, size: int = CACHE_SIZE, seed: Optional[int] = None):
        self.size = size
        self.entries: dict = {}
        self.lock = threading.Lock()
        self.rng = np.random.default_rng(None if seed is None else [int(seed), 1])

    @staticmethod
    def same_values(ent, address: int) -> bool:
        """Whether an entry's fingerprint (its item 3) still holds, its tensor at address
        (the address, shape and strides the fingerprint was taken at: checked before)."""
        fp = ent[3]
        return fp is None or _PEEK(address, fp[0], fp[1], fp[2])

    @staticmethod
    def version(src):
        """What a cached vector of ``src`` is valid for: its version counter, memory, shape,
        strides and dtype; None for inference tensors (no version counter: no caching)."""
        try:  # (torch.Size and stride()'s tuple compare as the tuples they are)
            return src._version, src.data_ptr(), src.shape, src.stride(), src.dtype
        except RuntimeError:
            return None

    def get(self, src, transposed: bool, N: int, cdtype, compute):
        key = (id(src), transposed, cdtype)
        ver = self.version(src)
        if ver is None:
            return compute(), False
        with self.lock:
            ent = self.entries.get(key)
            if ent is not None and ent[0]() is src and ent[1] == ver \
                    and self.same_values(ent, ver[1]):
                return ent[2], True
            # (the values the projection is made of)
            fp = _print_of(src, ver[1], ver[2], ver[3], self.rng)
        val = compute()
        with self.lock:
            if len(self.entries) >= self.size:
                self.entries.pop(next(iter(self.entries)))
            self.entries[key] = (weakref.ref(src), ver, val, fp)
        return val, False


class _GuardCorePy:
    """The books the compiled helper's ``GuardCore`` keeps in the guard object (see
    ``_fastc``), where the helper is not there: plain attributes, the tally a list."""

    def _tally_add(self, transposed: bool, seconds: float) -> bool:
        """A passing lean check in the tally; whether fresh signs are due (the cache hits
        reached ``_lean_room``, as :meth:`Guard._cache_hit` counts them)."""
        t = self._tally
        i = 0 if transposed else 2
        t[i] += 1
        t[i + 1] += seconds
        t[4] += 1
        return t[4] == self._lean_room

    def _tally_clear(self) -> None:
        self._tally = [0, 0.0, 0, 0.0, 0]


#: the base class of Guard: the compiled books and common call where the helper is there
_GuardCore = getattr(_core._fastc, "GuardCore", None) if _LEAN_C is not None else None


class Guard(_GuardCore or _GuardCorePy, contextlib.ContextDecorator):
    """Context manager and decorator verifying matmuls; see :func:`guard`."""

    def __init__(self, sample: float = 1.0, on_fail: str = "raise", *,
                 seed: Optional[int] = None, accumulate: Optional[str] = None,
                 false_alarm: float = DEFAULT_FALSE_ALARM, max_rows: int = 8,
                 cache_weights: bool = True, bound: str = "probabilistic",
                 logger: Optional[logging.Logger] = None, defer: bool = False,
                 defer_bytes: int = DEFER_BYTES, refresh: Optional[int] = REFRESH):
        if on_fail not in ON_FAIL:
            raise UsageError(f"on_fail must be one of {ON_FAIL}, got {on_fail!r}")
        if not (0.0 <= float(sample) <= 1.0):
            raise UsageError(f"sample must be in [0, 1], got {sample!r}")
        self.sample = float(sample)
        self.on_fail = on_fail
        self.accumulate = accumulate
        self.false_alarm = float(false_alarm)
        self.max_rows = int(max_rows)
        self.cache_weights = bool(cache_weights)
        if bound not in ("probabilistic", "deterministic"):
            raise UsageError(f"bound must be 'probabilistic' or 'deterministic', got {bound!r}")
        self.bound = bound
        if refresh is not None and (isinstance(refresh, bool) or not isinstance(
                refresh, (int, np.integer)) or refresh < 1):
            raise UsageError(f"refresh must be None or a positive integer, got {refresh!r}")
        self.refresh = None if refresh is None else int(refresh)
        # the cache hits after which the signs are drawn anew (None: never)
        self._refresh_at = self.refresh
        self.logger = logger or LOG
        self.defer = bool(defer)
        self.defer_bytes = int(defer_bytes)
        self._pending: list = []  # deferred linear checks: (x, w, out, bias, versions,
        # transposed)
        self._pending_bytes = 0
        self._stats = GuardStats()
        # passing remembered lean checks not yet in stats (see _fold): linear's checks and
        # seconds, addmm's, and their cache hits; and the cache hits left until the signs
        # are drawn anew, counted from stats' (None: never)
        self._tally_clear()
        self._lean_room = self._refresh_at
        self._last = None  # the last result, or what the lean linear check knows of it
        if seed is not None and (not isinstance(seed, (int, np.integer)) or seed < 0):
            raise UsageError(f"seed must be None or a non-negative integer, got {seed!r}")
        self._rng = np.random.default_rng(seed)
        self._seed_at = int(self._rng.integers(0, 2 ** 62))  # the lean checks' seed sequence
        self._bias: dict = {}
        self._fast: dict = {}  # id(weight) -> _Lean: the lean check without property reads
        self._fast_mm: dict = {}  # the same for K x N weights (check_linear(transposed=False))
        self._seed = seed
        self._cache = _WeightCache(seed=seed)
        self._modes: list = []
        self._r: dict = {}

    @property
    def last_result(self) -> Optional[FreivaldsResult]:
        """The last check's result (a passing lean linear check's, made on request)."""
        last = self._last
        if last is None or isinstance(last, FreivaldsResult):
            return last
        ratio, seed, (M, K, N), name = last
        return FreivaldsResult(passed=True, reason="verified", suspect_rows=[], suspects=[],
                               threshold=np.asarray(np.nan), ratio=ratio,
                               false_alarm=self.false_alarm, screen_ratio=ratio,
                               shape=((), M, K, N), operand_format=name,
                               accumulate="float32", output_format=name,
                               check_precision="float32", seed=seed, backend="torch")

    @last_result.setter
    def last_result(self, res) -> None:
        self._last = res

    @property
    def stats(self) -> GuardStats:
        """The guard's counters (:class:`GuardStats`)."""
        if self._tally[4]:
            self._fold()
        return self._stats

    @stats.setter
    def stats(self, st: GuardStats) -> None:
        self._stats = st
        self._tally_clear()
        self._set_room()

    def _fold(self) -> None:
        """The passing remembered lean checks' tally (see :meth:`_linear_now`) into stats:
        as :meth:`_count` and :meth:`_cache_hit` count each."""
        t, st = self._tally, self._stats
        for i, name in ((0, "linear"), (2, "addmm")):
            n = t[i]
            if n:
                dt = t[i + 1]
                st.calls += n
                st.checked += n
                st.seconds += dt
                op = st.by_op.get(name)
                if op is None:
                    op = st.by_op[name] = [0, 0.0, 0, 0.0]
                op[0] += n
                op[1] += dt
        st.cache_hits += t[4]
        self._tally_clear()
        self._set_room()

    def _set_room(self) -> None:
        """The cache hits left, past stats', until the signs are drawn anew."""
        self._lean_room = None if self._refresh_at is None \
            else self._refresh_at - self._stats.cache_hits

    # counters as attributes
    @property
    def checked(self) -> int:
        return self.stats.checked

    @property
    def failed(self) -> int:
        return self.stats.failed

    @property
    def seconds(self) -> float:
        return self.stats.seconds

    def __enter__(self):
        mode = _make_mode(self)
        mode.__enter__()
        self._modes.append(mode)
        return self

    def __exit__(self, *exc):
        mode = self._modes.pop()
        out = mode.__exit__(*exc)
        if self._pending:
            if exc[0] is None:
                self.flush()
            else:  # the block failed: its deferred checks are dropped, not raised over it
                self.stats.skipped += len(self._pending)
                self._pending, self._pending_bytes = [], 0
        return out

    def flush(self) -> None:
        """Run the deferred linear checks (``defer=True``), in order.  A product whose
        operands, output, weight or bias changed in place since it was made is skipped
        (counted in ``stats.skipped``): its output is no longer the product.  Failures are
        handled by ``on_fail``; with ``"raise"`` every deferred check still runs and the
        first failure is raised at the end.  A check the checker cannot make is counted in
        ``stats.errors`` (``stats.skipped`` for operands it does not take), as at once."""
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        if not pending:
            return
        with (_TORCH or _torch())._C.DisableTorchFunction():  # (as the mode's checks)
            self._flush(pending)

    def _flush(self, pending) -> None:
        first = None
        for x, w, out, bias, ver, tr in pending:
            if ver != _versions(x, w, out, bias):
                self._skip()
                continue
            try:
                self._linear_now(x, w, out, bias, tr)
            except ProductCheckError as exc:
                if first is None:
                    first = exc
            except UsageError:  # (as for a product checked at once: not one to judge)
                self.stats.skipped += 1
            except Exception as exc:  # a checker error: counted, the other checks still run
                self.stats.errors += 1
                self.logger.warning("kcontract.freivalds guard could not check a deferred "
                                    "linear product: %r", exc)
        if first is not None:
            raise first

    def _skip(self) -> None:
        """A call the guard does not check (a form of a product it does not take, a product
        changed before its deferred check): counted as skipped."""
        self.stats.calls += 1
        self.stats.skipped += 1

    def _check_product(self, name: str, a, b, c, bias=None, weight=None,
                       transposed: bool = False) -> None:
        """:meth:`_check` of a product as matmul takes it (1-D operands, batch dimensions;
        a batch with one shared 2-D right operand as the single product of its stacked
        rows), or a failure where c has not the product's shape."""
        try:
            a2, b2, c2 = _as_matrices(a, b, c)
        except _WrongShape as e:
            return self._wrong_shape(name, *e.args)
        if b2.dim() == 2:
            a2, b2, c2 = _flat(a2, b2, c2)
        self._check(name, a2, b2, c2, bias=bias, weight=weight, transposed=transposed)

    def _cache_hit(self) -> None:
        """A check from a cached projection: counted, and every ``refresh`` of them the
        signs are drawn anew.  (:meth:`_linear_now` tallies its own: see :meth:`_fold`.)"""
        st = self.stats
        st.cache_hits += 1
        if st.cache_hits == self._refresh_at:
            self._new_signs()
        else:
            self._set_room()

    def _new_signs(self) -> None:
        """Fresh signs for every cached projection, drawn from the guard's generator: the
        projections (and the biases' b . r) are made anew at their next use.  So a fault
        that cancels out of the residual under one draw of signs (several wrong elements
        of a row, two swapped columns) does not cancel for the guard's whole life, and the
        outcomes of its checks do not tell one draw for long."""
        with self._cache.lock:
            self._cache.entries.clear()
        self._r.clear()
        self._bias.clear()
        self._fast.clear()
        self._fast_mm.clear()
        self._refresh_at = self.stats.cache_hits + self.refresh
        self._set_room()

    # ------------------------------------------------------------------
    def _signs(self, N: int, dtype) -> np.ndarray:
        key = (N, dtype)
        r = self._r.get(key)
        if r is None:
            r = signs(int(self._rng.integers(0, 2 ** 62)), 0, N, dtype)
            self._r[key] = r
        return r

    def _sampled_out(self) -> bool:
        """Whether sampling skips this call (counted as a call, and sampled out)."""
        if self.sample < 1.0 and self._rng.random() >= self.sample:
            self.stats.calls += 1
            self.stats.sampled_out += 1
            return True
        return False

    def _count(self, name: str, dt: float, screened: bool) -> None:
        """A check made: the counters, and the per-op seconds.  (:meth:`_linear_now`
        tallies its own: see :meth:`_fold`.)"""
        st = self.stats
        st.checked += 1
        op = st.by_op.get(name)
        if op is None:
            op = st.by_op[name] = [0, 0.0, 0, 0.0]
        op[0] += 1
        op[1] += dt
        if screened:  # rows past the screen: the float64 look at them was paid
            op[2] += 1
            op[3] += dt

    def _check(self, name: str, a, b, c, bias=None, weight=None, transposed=False):
        """verify() of one intercepted product (sampling is the caller's)."""
        st = self.stats
        st.calls += 1
        t0 = time.perf_counter()
        try:
            pre = None
            if self.cache_weights and weight is not None and b.dim() == 2 \
                    and b.shape[-1] >= _core.NARROW:  # (narrow: a residual per column)
                pre = self._pre_for(weight, transposed)
            seed = int(self._rng.integers(0, 2 ** 62))
            res = verify(a, b, c, accumulate=self.accumulate, false_alarm=self.false_alarm,
                         max_rows=self.max_rows, bias=bias, seed=seed, bound=self.bound,
                         _pre=pre)
        except NonFiniteOperandError:
            st.skipped += 1
            return
        except UsageError:
            st.skipped += 1
            return
        finally:
            if c.is_cuda:
                import torch

                torch.cuda.synchronize(c.device)
            dt = time.perf_counter() - t0
            st.seconds += dt
        self._count(name, dt, bool(res.screened_rows))
        self.last_result = res
        if not res.passed:
            where = ", ".join(str(s.index) for s in res.suspects[:5])
            self._fail(name, res, f"{name}: product failed verification ({res.reason}); "
                                  f"{len(res.suspects)} suspect element(s)"
                                  f"{': ' + where if where else ''}")

    def _fail(self, name: str, res: FreivaldsResult, msg: str) -> None:
        """A failed check: counted, kept, and handled by ``on_fail``."""
        st = self.stats
        st.failed += 1
        st.failures.append((name, msg))
        del st.failures[:-100]
        if self.on_fail == "raise":
            raise ProductCheckError(msg, res)
        if self.on_fail == "warn":
            warnings.warn(msg, ProductCheckWarning, stacklevel=5)
        else:
            self.logger.error(msg)

    def _wrong_shape(self, name: str, got: tuple, want: tuple) -> None:
        """An intercepted product whose output does not have the product's shape: a
        failure (the output is not the product, whatever its values), not a checker
        error."""
        self.stats.calls += 1
        self._count(name, 0.0, False)
        res = FreivaldsResult(passed=False, reason="shape", suspect_rows=[], suspects=[],
                              threshold=np.zeros(()), ratio=math.inf, false_alarm=0.0,
                              screen_ratio=math.inf,
                              message=f"output of shape {got}, the product's is {want}")
        self.last_result = res
        self._fail(name, res, f"{name}: product failed verification (shape): output of "
                              f"shape {got}, the product's is {want}")

    def check_linear(self, x, weight, out, bias=None, *, transposed: bool = True) -> None:
        """Check one ``F.linear`` product ``out = x @ weight.T (+ bias)`` as the guard
        does for each one it intercepts (counted in :attr:`stats`, a failure handled by
        ``on_fail``).  On a CPU, for float32, bfloat16 and float16 tensors with a cached
        weight projection, the common case runs in one compiled call from host views of x and
        out (see :meth:`_lean_linear`); anything else goes through :func:`verify`.
        ``transposed=False``: ``out = x @ weight (+ bias)`` with a K x N weight, as
        ``torch.addmm(bias, x, weight)`` computes it (GPT-2's ``Conv1D``), the same
        checks (counted as "addmm")."""
        if self.sample >= 1.0 and not self.defer:  # (the common case, in fewest steps)
            return self._linear_now(x, weight, out, bias, transposed)
        if self.sample < 1.0 and self._sampled_out():
            return
        if self.defer and type(out) is (_TORCH or _torch()).Tensor:
            size = x.nbytes + out.nbytes
            if size <= DEFER_PRODUCT_BYTES and self._pending_bytes + size <= self.defer_bytes:
                ver = _versions(x, weight, out, bias)
                if ver is not None:  # (inference tensors: no counter to see a change by)
                    self._pending.append((x, weight, out, bias, ver, transposed))
                    self._pending_bytes += size
                    return
        self._linear_now(x, weight, out, bias, transposed)

    def _linear_now(self, x, weight, out, bias, transposed: bool = True) -> None:
        """:meth:`check_linear` after sampling: the lean check that reads each property,
        else :func:`verify` (without a weight cache: verify).  With the compiled helper this
        is ``_linear_now_py`` and the guard's ``_linear_now`` is GuardCore's, which first
        makes the remembered check (the guard's ``_fast`` entries, see :meth:`_remember`)
        and hands what follows it to :meth:`_linear_rest`; without the helper nothing is
        remembered."""
        return self._linear_rest(x, weight, out, bias, transposed,
                                 None if self.cache_weights else False, _clock())

    def _linear_rest(self, x, weight, out, bias, transposed, last, t0) -> None:
        """:meth:`_linear_now` after the remembered check (``last``: its result, None where
        it was not made, False where verify is to decide; ``t0``: the clock when the check
        began): the lean check that reads each property where the remembered one was not
        made, a passing one tallied (``_tally_add``, counted in :attr:`stats` when they are
        read, :meth:`_fold`: calling :meth:`_count` and :meth:`_cache_hit` cost 1-2.6 us of
        a 36-74 us check at M = 1 right after a product, medians of 400), else
        :func:`verify`."""
        if last is None and self._lean_linear(x, weight, out, bias, transposed):
            last = True
        if last is not None and last is not False:  # a lean check made, and passed
            # (counted in stats when they are read: _fold; fresh signs as _cache_hit draws)
            if self._tally_add(transposed, _clock() - t0):
                self._new_signs()
            return
        self._check_product("linear" if transposed else "addmm", x,
                            weight.T if transposed else weight, out, bias=bias,
                            weight=weight, transposed=transposed)

    def _lean_linear(self, x, w, out, bias, transposed: bool = True) -> bool:
        """The common linear check without its general machinery: contiguous CPU float32
        (or bfloat16, float16) x and out, a weight whose projection W^T r is cached (from an
        earlier check of it), a bias's b . r cached beside it: ``_fastc.linear`` (verify's
        compiled stage 1 and screen with the cached projection, reading x and out at their
        addresses) with a seed from the guard's own sequence.
        True where every row clears the screen; False where this path does not apply or
        a row is beyond the screen (the caller then runs :func:`verify`, which decides and
        reports)."""
        tensor = (_TORCH or _torch()).Tensor
        dt = x.dtype
        fmt = _LEAN.get(dt)
        if fmt is None or type(x) is not tensor or type(out) is not tensor \
                or out.dtype is not dt \
                or not (x.is_cpu and out.is_cpu and x.is_contiguous() and out.is_contiguous()) \
                or x.is_neg() or out.is_neg():  # (memory that is not the value)
            return False
        # (each step right after a product costs microseconds, from cold caches: the
        # weight's dtype is read off the version its projection is valid for, the sizes off
        # the shapes, what the check needs of the projection from one tuple made once)
        cache = self._cache
        ent = cache.entries.get((id(w), transposed, fmt[0]))
        if ent is None or ent[0]() is not w or _LINEAR is None:
            return False
        ver = ent[1]
        if ver[4] is not dt or cache.version(w) != ver or not cache.same_values(ent, ver[1]):
            return False
        proj = ent[2]
        half = fmt[2]
        parts = proj.cols.get("lean")
        if parts is None:
            parts = _lean_parts(proj, w, half, transposed)
        if not parts:
            return False
        r, y, K, N, b2 = parts
        zoff = 0.0
        if bias is not None:
            zoff = self._bias_dot(bias, dt, r)
            if zoff is None:
                return False
        sx, so = x.shape, out.shape
        if len(sx) == 2:
            M = sx[0]
            if len(so) != 2 or so[0] != M or sx[1] != K or so[1] != N:
                return False
        else:
            if len(sx) != len(so) or sx[-1] != K or so[-1] != N or sx[:-1] != so[:-1]:
                return False
            M = math.prod(sx[:-1])
        if M == 0:
            return False
        seed = self._seed_at = (self._seed_at + _STEP) & _SEED_MASK
        # the compiled check reads x and out (contiguous CPU tensors of one format, checked
        # above) at their addresses: one call into torch each
        ratio = _LINEAR(x.data_ptr(), out.data_ptr(), M, K, N, half, r, y, proj.b_rms, zoff,
                        seed, b2, ROW_RELIEF_MIN)
        if type(ratio) is tuple:  # the shape's first check: its plan, then the check
            if ratio in _core._NO_PLAN or not _core._common_plan(*ratio):
                _core._NO_PLAN.add(ratio)
                return False
            ratio = _LINEAR(x.data_ptr(), out.data_ptr(), M, K, N, half, r, y, proj.b_rms,
                            zoff, seed, b2, ROW_RELIEF_MIN)
        if ratio is None:
            return False
        self._last = (ratio, seed, (M, K, N), fmt[1])
        self._remember(x, w, out, bias, ent, parts, M, fmt, transposed)
        return True

    def _remember(self, x, w, out, bias, ent, parts, M: int, fmt,
                  transposed: bool = True) -> None:
        """After a lean check that passed: what :meth:`_linear_now`'s remembered check
        (``_fastc.lean``: a TensorGuards check of x's, out's, the weight's and the bias's
        types, dispatch keys, dtypes, sizes and strides, then the weight's and the bias's
        version counters, addresses and sampled bytes) needs to repeat it for tensors like
        these (a :class:`_Lean`; at most GUARDS_PER_WEIGHT shapes a weight, the latest
        first)."""
        TG = _tensorguards.tensor_guards()
        ver, fp = ent[1], ent[3]
        if TG is False or fp is None or _LEAN_C is None:
            return
        bt = None
        if bias is not None:
            hit = self._bias.get(id(bias))
            if hit is None or hit[1]() is not bias or hit[3] is None:
                return
            bt = (hit[1], hit[0][1], hit[0][2]) + hit[3]
        r, y, K, N, b2 = parts
        try:
            check = _tensorguards.shape_guard(TG, (x, out, w) if bias is None
                                              else (x, out, w, bias)).check
        except Exception:  # (tensors it does not take: the property reads go on)
            return
        shape = (check, M, (M, K, N))
        fast = self._fast if transposed else self._fast_mm
        ln = fast.get(id(w))
        if ln is not None and ln.wref() is w and ln.version == ver[0] \
                and ln.address == ver[1] and ln.print == fp and ln.r is r \
                and (ln.bias is None) == (bt is None) \
                and (bt is None or (ln.bias[0]() is bias and ln.bias[1:] == bt[1:])):
            fast[id(w)] = ln._replace(guards=(shape,) + ln.guards[:GUARDS_PER_WEIGHT - 1])
            return
        if not (r.dtype == np.float32 and y.dtype == np.float32 and r.shape == (N,)
                and y.shape == (K,) and r.flags.c_contiguous and y.flags.c_contiguous):
            return  # (the compiled check reads them at their addresses)
        if len(fast) >= CACHE_SIZE:  # (only for an entry that will be made)
            fast.pop(next(iter(fast)))
        fast[id(w)] = _Lean(ent[0], ver[0], ver[1], *fp, bt, (shape,), K, N, fmt[2],
                                  r, y, ent[2].b_rms, b2, 0.0 if bt is None else hit[2],
                                  fmt[1], r.ctypes.data, y.ctypes.data)

    def _bias_dot(self, bias, dt, r):
        """b . r for a bias (as the common call computes it), cached on the tensor, its
        version, memory and sampled elements' bytes; None where this path does not take
        it."""
        torch = _TORCH or _torch()
        if type(bias) is not torch.Tensor and not isinstance(bias, torch.Tensor):
            return None
        try:
            key = (id(bias), bias._version, bias.data_ptr(), r.shape[0], dt)
        except RuntimeError:  # an inference tensor: no version counter to cache it by
            return None
        hit = self._bias.get(id(bias))
        if hit is not None and hit[0] == key and hit[1]() is bias \
                and self._cache.same_values(hit, key[2]):
            return hit[2]
        b = bias.detach()
        if type(b) is not torch.Tensor or b.dtype is not dt or b.device.type != "cpu" \
                or tuple(b.shape) != (r.shape[0],):
            return None
        # (as a weight's projection: the bytes of sampled elements, for writes through .data)
        fp = _print_of(b, key[2], b.shape, b.stride(), self._cache.rng)
        ops = _backend.ops_for(b)
        val = float(ops.take(b, ()) @ r)
        if len(self._bias) >= CACHE_SIZE:
            self._bias.pop(next(iter(self._bias)))
        self._bias[id(bias)] = (key, weakref.ref(bias), val, fp)
        return val

    def _pre_for(self, weight, transposed):
        """A callable for verify's stage 1 that returns (r, B r) from the cache."""
        cache = self._cache

        def pre(p, cdtype):
            r = self._signs(p.N, p.ops.host_dtype(cdtype))

            def compute():
                rd = p.ops.from_host(r, cdtype)
                y = p.ops.matvec(p.b, rd, cdtype)
                return Projection(rd, y, r, b_rms(p, 0, y))

            proj, hit = cache.get(weight, transposed, p.N, cdtype, compute)
            if hit:
                self._cache_hit()  # (a draw of new signs after this check, which has its own)
            return proj
        return pre


# check_linear and _linear_now compiled (GuardCore's, see _fastc): the remembered check
# and its books without a Python frame or an attribute lookup; every other call goes to the
# Python methods, kept as _check_linear_py and _linear_now_py
if _GuardCore is not None:
    Guard._check_linear_py, Guard._linear_now_py = Guard.check_linear, Guard._linear_now
    del Guard.check_linear, Guard._linear_now
    _core._fastc.guard_consts(_clock, _STEP, _SEED_MASK, ROW_RELIEF_MIN, DEFER_PRODUCT_BYTES)


#: the shapes (of x and out) a weight's fast lean check is kept for
GUARDS_PER_WEIGHT = 3


class _Lean(NamedTuple):
    """What ``_fastc.lean`` repeats a weight's lean linear check from (its fields in this
    order: the compiled call reads them by position, see L_* in _fastc.c)."""

    wref: object  # weakref to the weight
    version: int  # its version counter, address and fingerprint (offsets, item size,
    address: int  # bytes) the projection is valid for
    offsets: bytes
    item: int
    bytes_: bytes
    bias: Optional[tuple]  # (weakref, version, address, offsets, item size, bytes) or None
    guards: tuple  # ((TensorGuards.check, M, (M, K, N)), ...), the latest first
    K: int
    N: int
    half: int  # the compiled check's format (0 float32, 1 bfloat16, 2 float16)
    r: np.ndarray  # the signs and the projection y = W^T r (float32)
    y: np.ndarray
    brms: Optional[float]  # rms_k ||W_k||
    b2: Optional[np.ndarray]  # ||W_k||^2 (float32 weights)
    zoff: float  # the bias's b . r
    name: str  # the format's name
    r_address: int  # r's and y's data (float32 of N and K, C-contiguous: the compiled
    y_address: int  # check reads them there, the arrays above holding the memory)

    @property
    def print(self) -> tuple:
        """The weight's fingerprint, as _print_of gives it."""
        return (self.offsets, self.item, self.bytes_)


def _lean_parts(proj, w, half: int, transposed: bool = True) -> tuple:
    """What the lean linear check reads of a cached projection, made once and kept with it:
    r and y = W^T r (float32 host arrays), K, N, and for float32 weights ||W_k||^2 per
    column (the per-row second look's, as the general path's row_noise computes it; None
    for 16-bit weights); an empty tuple where the check does not take the shape (K or N
    below 64)."""
    r, y = _core.host_parts(proj)
    K, N = y.shape[0], r.shape[0]
    parts = ()
    if K >= 64 and N >= 64:
        b2 = None if half else np.ascontiguousarray(
            _backend.ops_for(w).row_sq(w.detach().T if transposed else w.detach(), None),
            dtype=np.float32)
        parts = (r, y, K, N, b2)
    proj.cols["lean"] = parts
    return parts


def _versions(x, w, out, bias) -> Optional[tuple]:
    """The version counters of a deferred product's tensors (an in-place change bumps
    one); None for inference tensors, which have none (their products are checked at
    once, never deferred)."""
    try:
        return (x._version, w._version, out._version,
                None if bias is None else bias._version)
    except RuntimeError:
        return None


def _torch():
    """torch, imported (a guard is only made where it is installed), with the lean
    check's dtype table."""
    global _TORCH
    import torch

    for half, (dt, name) in enumerate(((torch.float32, "float32"),
                                       (torch.bfloat16, "bfloat16"),
                                       (torch.float16, "float16"))):
        _LEAN.setdefault(dt, (torch.float32, name, half))
    if _TORCH is None and _LEAN_C is not None:  # (the remembered check's reads: see _fastc)
        base = getattr(torch._C, "TensorBase", None)
        slots = getattr(base, "__dict__", {})
        if "_version" in slots and "data_ptr" in slots:
            _core._fastc.set_tensor_access(slots["_version"], slots["data_ptr"], torch.Tensor)
    _TORCH = torch
    return torch


def _make_mode(g: Guard):
    torch = _torch()
    from torch.overrides import TorchFunctionMode

    F = torch.nn.functional
    plain = {torch.matmul: "matmul", torch.Tensor.matmul: "matmul",
             torch.Tensor.__matmul__: "matmul", torch.linalg.matmul: "matmul",
             torch.mm: "mm", torch.Tensor.mm: "mm", torch.bmm: "bmm", torch.Tensor.bmm: "bmm",
             torch.mv: "mv", torch.Tensor.mv: "mv"}
    rmat = {torch.Tensor.__rmatmul__}
    linear = {F.linear}
    fused = {torch.addmm: "addmm", torch.Tensor.addmm: "addmm",
             torch.baddbmm: "baddbmm", torch.Tensor.baddbmm: "baddbmm"}
    einsum = {torch.einsum, torch.functional.einsum}
    # fused attention: its products (q k^T, the probabilities times v) are not returned,
    # so not checkable at the cost of a check -- counted as skipped, never silently passed
    unchecked = {f for f in (getattr(F, "scaled_dot_product_attention", None),) if f}

    off = torch._C.DisableTorchFunction
    watched = set(plain) | rmat | linear | set(fused) | einsum | unchecked

    class _Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if func not in watched:  # (every other torch function: passed straight on)
                return out
            with off():  # (the check's own torch calls reach no mode entered before it)
                return self._checked(func, args, kwargs, out)

        def _checked(self, func, args, kwargs, out):
            try:
                if func in plain or func in rmat:
                    if func in rmat:
                        a, b = args[1], args[0]
                    else:
                        a = args[0] if args else kwargs.get("input")
                        b = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get(
                            "mat2", kwargs.get("vec")))
                    if _tensors(a, b, out) and not g._sampled_out():
                        g._check_product(plain.get(func, "matmul"), a, b, out,
                                         weight=_weight_of(b))
                elif func in linear:
                    x = args[0] if args else kwargs.get("input")
                    w = args[1] if len(args) > 1 else kwargs.get("weight")
                    bias = args[2] if len(args) > 2 else kwargs.get("bias")
                    if _tensors(x, w, out) and w.dim() == 2:
                        g.check_linear(x, w, out, bias)
                elif func in fused:
                    self._fused(fused[func], args, kwargs, out)
                elif func in einsum:
                    self._einsum(args, out)
                elif func in unchecked and not g._sampled_out():
                    g._skip()
            except ProductCheckError:
                raise
            except UsageError:
                g.stats.skipped += 1
            except Exception as exc:  # never break the guarded code over a checker bug
                g.stats.errors += 1
                g.logger.warning("kcontract.freivalds guard could not check %s: %r",
                                 getattr(func, "__name__", func), exc)
            return out

        def _fused(self, name, args, kwargs, out):
            """addmm / baddbmm: ``out = beta input + alpha (mat1 @ mat2)`` (batched for
            baddbmm), checked as the product with ``input`` as a bias where beta is 0
            (input ignored) or 1 and input one row of N shared by every row (and batch); an
            alpha other than 1 must be a power of two (``out / alpha`` is then the product
            exactly, barring overflow and underflow).  Other forms (an input of more than
            one row, other scalings) are not checked: counted in ``stats.skipped``."""
            names = ("input", "batch1", "batch2") if name == "baddbmm" \
                else ("input", "mat1", "mat2")
            inp, a, b = (args[i] if len(args) > i else kwargs.get(n)
                         for i, n in enumerate(names))
            if not _tensors(a, b, out):
                return
            beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
            N = b.shape[-1]
            bias = None
            if len(args) > 3:  # (the deprecated positional beta and alpha)
                form = False
            elif beta == 1 and isinstance(inp, torch.Tensor):
                form = inp.numel() == N and (inp.dim() == 0 or inp.shape[-1] == N)
                bias = (inp if inp.dim() == 1 else inp.reshape(N)) if form else None
            else:
                form = beta == 0
            if not form or not isinstance(alpha, (int, float)) or alpha == 0 \
                    or abs(math.frexp(alpha)[0]) != 0.5:  # (alpha not a power of two)
                if not g._sampled_out():
                    g._skip()
                return
            if name == "addmm" and alpha == 1 and a.dim() == 2 \
                    and _weight_of(b) is not None:  # a layer's weight: check_linear's paths
                g.check_linear(a, b, out, bias, transposed=False)
                return
            if g._sampled_out():
                return
            if alpha != 1:
                out = out / alpha
                bias = None if bias is None else bias / alpha
            g._check_product(name, a, b, out, bias=bias, weight=_weight_of(b))

        def _einsum(self, args, out):
            """A two-operand einsum that is a (batched) matrix product (see
            :func:`_einsum_operands`), checked as that product (a suspect's position is
            then in its (batch, M, N) arrangement of the output); other two-operand
            equations, or more operands, counted in ``stats.skipped``; one operand (a
            transpose, a trace, a sum) is no product."""
            if not args or not isinstance(args[0], str):  # (torch hands the sublist form,
                return  # einsum(a, [0, 1], b, [1, 2]), over as its equation)
            ops = args[1:]
            if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
                ops = tuple(ops[0])
            if len(ops) < 2 or not _tensors(*ops, out) or g._sampled_out():
                return
            mats = _einsum_operands(args[0], *ops, out) if len(ops) == 2 else None
            if mats is None:
                g._skip()
                return
            g._check("einsum", *mats)

    return _Mode()


def _tensors(*xs) -> bool:
    import torch

    return all(isinstance(x, torch.Tensor) for x in xs)


def _weight_of(b):
    """b where a product's right operand is a layer's weight (2-D and fixed: its projection
    is cached), else None."""
    return b if b.dim() == 2 and _is_fixed(b) else None


def _is_fixed(t) -> bool:
    """A right operand worth caching: a parameter or a leaf that is not an activation."""
    import torch

    return isinstance(t, torch.nn.Parameter) or (t.is_leaf and not t.requires_grad
                                                  and t.grad_fn is None and t.dim() == 2)


class _WrongShape(Exception):
    """An intercepted product's output without the product's shape: (got, want)."""


def _as_matrices(a, b, out):
    """1-D operands of matmul as 1 x K / K x 1 matrices, the output reshaped to
    the (batch..., M, N) of the matrix product.  Raises _WrongShape where the output's
    shape is not the one matmul gives (the 1-D operands' dimensions dropped)."""
    import torch

    a1, b1 = a.dim() == 1, b.dim() == 1
    if a1:
        a = a.unsqueeze(0)
    if b1:
        b = b.unsqueeze(-1)
    sa, sb = a.shape, b.shape
    ba, bb = sa[:-2], sb[:-2]
    # (the common cases without torch.broadcast_shapes, a Python function of some cost)
    try:
        batch = ba if ba == bb or not bb else bb if not ba else torch.broadcast_shapes(ba, bb)
    except RuntimeError:  # (operands matmul itself refuses: not a product to judge)
        raise UsageError(f"operands of shapes {tuple(sa)} and {tuple(sb)} do not broadcast")
    shape = tuple(batch) + (sa[-2], sb[-1])
    if out.shape == shape:
        return a, b, out
    want = tuple(batch) + (() if a1 else (sa[-2],)) + (() if b1 else (sb[-1],))
    if tuple(out.shape) != want:
        raise _WrongShape(tuple(out.shape), want)
    return a, b, out.reshape(shape)


def _einsum_operands(equation, a, b, out):
    """A two-operand ``torch.einsum`` that is a (batched) matrix product as one: its
    indices sorted into batch (in both operands and the output), M (the first operand's
    and the output's), N (the second's and the output's) and K (both operands', summed),
    each operand permuted to (batch..., M, K) / (batch..., K, N) and reshaped (M, N and K
    of several indices merged: a copy where the layout needs one), the output to
    (batch..., M, N); batch indices of size 1 on one side broadcast.  None where the
    equation is not such a product (an index summed within one operand, a repeated index:
    a trace or a diagonal; an elementwise product) or does not match the shapes."""
    eq = equation.replace(" ", "")
    if "->" in eq:
        ins, res = eq.split("->")
    else:  # implicit output: the indices that appear once, in alphabetical order
        ins = eq
        res = None
    parts = ins.split(",")
    if len(parts) != 2:
        return None
    spare = iter(ch for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if ch not in eq)
    ell = None
    if "..." in eq:  # broadcast dimensions: letters of their own, right-aligned
        n = max(t.dim() - len(p.replace("...", "")) for t, p in zip((a, b), parts)
                if "..." in p)
        ell = "".join(next(spare) for _ in range(n))
        parts = [p.replace("...", ell[len(ell) - (t.dim() - len(p.replace("...", ""))):])
                 if "..." in p else p for t, p in zip((a, b), parts)]
        if res is not None:
            res = res.replace("...", ell)
    ia, ib = parts
    if res is None:
        once = sorted(ch for ch in set(ia + ib) if (ia + ib).count(ch) == 1)
        res = (ell or "") + "".join(ch for ch in once if not ell or ch not in ell)
    if len(ia) != a.dim() or len(ib) != b.dim() or len(res) != out.dim() \
            or len(set(ia)) != len(ia) or len(set(ib)) != len(ib) or len(set(res)) != len(res):
        return None
    if any(ch not in res and ch not in (ib if ch in ia else ia) for ch in ia + ib) \
            or any(ch not in ia and ch not in ib for ch in res):
        return None  # (an index summed within one operand; an output index of neither)
    size = {}
    for t, idx in ((a, ia), (b, ib)):
        for ch, n in zip(idx, t.shape):
            had = size.get(ch, 1)
            if n != had and n != 1 and had != 1:  # (sizes that do not broadcast)
                return None
            size[ch] = max(had, n)
    if any(out.shape[i] != size[ch] for i, ch in enumerate(res)):
        return None
    batch = [ch for ch in res if ch in ia and ch in ib]
    m = [ch for ch in res if ch in ia and ch not in ib]
    n_ = [ch for ch in res if ch in ib and ch not in ia]
    k = [ch for ch in ia if ch in ib and ch not in res]
    if not k and not (m and n_):
        return None  # (elementwise: no index summed, no outer product)
    prod = math.prod

    def arrange(t, idx, order, rows, cols):  # (batch dimensions kept apart: a strided
        t = t.permute(*(idx.index(ch) for ch in order))  # batch of views is checked as
        t = t.expand(*(size[ch] for ch in order))  # it is, where merging would copy)
        return t.reshape(*(size[ch] for ch in batch), prod(size[ch] for ch in rows),
                         prod(size[ch] for ch in cols))

    return (arrange(a, ia, batch + m + k, m, k), arrange(b, ib, batch + k + n_, k, n_),
            arrange(out, res, batch + m + n_, m, n_))


def _flat(a, b, c):
    """A batch of products with one shared 2-D right operand (a linear layer's weight) as
    the single product of the stacked rows -- (batch... * M) x K times K x N, the same
    numbers -- when a and c can be viewed that way without a copy; otherwise as given.
    (A suspect's row index is then the row of the stacked rows.)"""
    if a.dim() > 2 and b.dim() == 2 and a.is_contiguous() and c.is_contiguous():
        return a.reshape(-1, a.shape[-1]), b, c.reshape(-1, c.shape[-1])
    return a, b, c


def guard(sample: float = 1.0, on_fail: str = "raise", **kwargs) -> Guard:
    """Verify ``torch.matmul``, ``@``, ``linalg.matmul``, ``mm``, ``bmm``, ``mv``,
    ``nn.functional.linear``, ``addmm``, ``baddbmm`` and ``einsum`` calls made inside the
    block (or the decorated function): ``addmm`` / ``baddbmm`` where beta is 0 or input a
    bias row shared by every row and alpha a power of two, ``einsum`` where its two
    operands' equation is a (batched) matrix product; the other forms counted as skipped.

    ``sample``: fraction of calls checked (randomly chosen).  ``on_fail``:
    ``"raise"`` a :class:`ProductCheckError`, ``"warn"`` (a
    :class:`ProductCheckWarning`) or ``"log"`` (logger ``kcontract.freivalds``).
    Keyword options: ``seed``, ``accumulate``, ``false_alarm``, ``max_rows``,
    ``cache_weights``, ``bound``, ``logger``, ``defer`` (linear products are recorded and
    checked when the block ends or at :meth:`Guard.flush`, one after the other: a
    decode step's small products then cost their checks without the per-call overhead
    right after each product; a product changed in place before the check is skipped;
    at most ``defer_bytes`` of inputs and outputs are held, beyond that a product is
    checked at once, as is a product whose input and output take more than
    ``DEFER_PRODUCT_BYTES``, 128 KiB: read faster from the caches right after it),
    ``refresh`` (checks from cached weight projections between two draws of the signs,
    default 4096; None: one draw for the guard's life).
    ``guard.stats`` counts calls, checked, failed, skipped and the seconds spent checking.
    """
    return Guard(sample, on_fail, **kwargs)
