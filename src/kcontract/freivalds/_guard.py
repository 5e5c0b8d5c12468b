"""A PyTorch guard: verify every matmul inside a ``with`` block or decorated function.

    with kcontract.freivalds.guard(sample=1.0, on_fail="raise") as g:
        y = model(x)
    print(g.stats)

Intercepts ``torch.matmul``, ``@``, ``Tensor.matmul``, ``mm``, ``bmm`` and
``nn.functional.linear`` (hence ``nn.Linear``) through a ``TorchFunctionMode``.
Each checked call costs one pass over the left operand and one over the output;
for a fixed right operand (a weight, B = W^T in ``linear``) the vector B r is
computed once and cached, keyed on the weight object and its version counter,
so an in-place update of the weight invalidates it.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import UsageError
from ._core import (DEFAULT_FALSE_ALARM, FreivaldsResult, NonFiniteOperandError,
                    ProductCheckError, verify)
from ._screen import Projection, b_rms, signs

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


class _WeightCache:
    """B r for fixed right operands, keyed on the tensor object and its version."""

    def __init__(self, size: int = CACHE_SIZE):
        self.size = size
        self.entries: dict = {}
        self.lock = threading.Lock()

    def get(self, src, transposed: bool, N: int, cdtype, compute):
        key = (id(src), transposed, cdtype)
        try:
            ver = (src._version, src.data_ptr(), tuple(src.shape), tuple(src.stride()), src.dtype)
        except RuntimeError:  # inference tensors have no version counter: no caching
            return compute(), False
        with self.lock:
            ent = self.entries.get(key)
            if ent is not None and ent[0]() is src and ent[1] == ver:
                return ent[2], True
        val = compute()
        with self.lock:
            if len(self.entries) >= self.size:
                self.entries.pop(next(iter(self.entries)))
            self.entries[key] = (weakref.ref(src), ver, val)
        return val, False


class Guard(contextlib.ContextDecorator):
    """Context manager and decorator verifying matmuls; see :func:`guard`."""

    def __init__(self, sample: float = 1.0, on_fail: str = "raise", *,
                 seed: Optional[int] = None, accumulate: Optional[str] = None,
                 false_alarm: float = DEFAULT_FALSE_ALARM, max_rows: int = 8,
                 cache_weights: bool = True, bound: str = "probabilistic",
                 logger: Optional[logging.Logger] = None):
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
        self.logger = logger or LOG
        self.stats = GuardStats()
        self.last_result: Optional[FreivaldsResult] = None
        self._rng = np.random.default_rng(seed)
        self._seed = seed
        self._cache = _WeightCache()
        self._modes: list = []
        self._r: dict = {}

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
        return mode.__exit__(*exc)

    # ------------------------------------------------------------------
    def _signs(self, N: int, dtype) -> np.ndarray:
        key = (N, dtype)
        r = self._r.get(key)
        if r is None:
            r = signs(int(self._rng.integers(0, 2 ** 62)), 0, N, dtype)
            self._r[key] = r
        return r

    def _check(self, name: str, a, b, c, bias=None, weight=None, transposed=False):
        st = self.stats
        st.calls += 1
        if self.sample < 1.0 and self._rng.random() >= self.sample:
            st.sampled_out += 1
            return
        t0 = time.perf_counter()
        try:
            pre = None
            if self.cache_weights and weight is not None and b.dim() == 2:
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
        st.checked += 1
        op = st.by_op.get(name)
        if op is None:
            op = st.by_op[name] = [0, 0.0, 0, 0.0]
        op[0] += 1
        op[1] += dt
        if res.screened_rows:  # rows past the screen: the float64 look at them was paid
            op[2] += 1
            op[3] += dt
        self.last_result = res
        if not res.passed:
            st.failed += 1
            where = ", ".join(str(s.index) for s in res.suspects[:5])
            msg = (f"{name}: product failed verification ({res.reason}); {len(res.suspects)} "
                   f"suspect element(s){': ' + where if where else ''}")
            st.failures.append((name, msg))
            del st.failures[:-100]
            if self.on_fail == "raise":
                raise ProductCheckError(msg, res)
            if self.on_fail == "warn":
                warnings.warn(msg, ProductCheckWarning, stacklevel=4)
            else:
                self.logger.error(msg)

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
                self.stats.cache_hits += 1
            return proj
        return pre


def _make_mode(g: Guard):
    import torch
    from torch.overrides import TorchFunctionMode

    F = torch.nn.functional
    plain = {torch.matmul: "matmul", torch.Tensor.matmul: "matmul",
             torch.Tensor.__matmul__: "matmul", torch.mm: "mm", torch.Tensor.mm: "mm",
             torch.bmm: "bmm", torch.Tensor.bmm: "bmm"}
    rmat = {torch.Tensor.__rmatmul__}
    linear = {F.linear}

    class _Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            try:
                if func in plain or func in rmat:
                    if func in rmat:
                        a, b = args[1], args[0]
                    else:
                        a = args[0] if args else kwargs.get("input")
                        b = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("mat2"))
                    if _tensors(a, b, out):
                        a2, b2, c2 = _as_matrices(a, b, out)
                        if b2.dim() == 2:
                            a2, b2, c2 = _flat(a2, b2, c2)
                        param = b if _is_fixed(b) and b.dim() == 2 else None
                        g._check(plain.get(func, "matmul"), a2, b2, c2, weight=param)
                elif func in linear:
                    x = args[0] if args else kwargs.get("input")
                    w = args[1] if len(args) > 1 else kwargs.get("weight")
                    bias = args[2] if len(args) > 2 else kwargs.get("bias")
                    if _tensors(x, w, out) and w.dim() == 2:
                        a2, _, c2 = _flat(*_as_matrices(x, w.T, out))
                        g._check("linear", a2, w.T, c2, bias=bias, weight=w, transposed=True)
            except ProductCheckError:
                raise
            except UsageError:
                g.stats.skipped += 1
            except Exception as exc:  # never break the guarded code over a checker bug
                g.stats.errors += 1
                g.logger.warning("kcontract.freivalds guard could not check %s: %r",
                                 getattr(func, "__name__", func), exc)
            return out

    return _Mode()


def _tensors(*xs) -> bool:
    import torch

    return all(isinstance(x, torch.Tensor) for x in xs)


def _is_fixed(t) -> bool:
    """A right operand worth caching: a parameter or a leaf that is not an activation."""
    import torch

    return isinstance(t, torch.nn.Parameter) or (t.is_leaf and not t.requires_grad
                                                  and t.grad_fn is None and t.dim() == 2)


def _as_matrices(a, b, out):
    """1-D operands of matmul as 1 x K / K x 1 matrices, the output reshaped to
    the (batch..., M, N) of the matrix product."""
    import torch

    if a.dim() == 1:
        a = a.unsqueeze(0)
    if b.dim() == 1:
        b = b.unsqueeze(-1)
    shape = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])) + (a.shape[-2],
                                                                         b.shape[-1])
    return a, b, out.reshape(shape)


def _flat(a, b, c):
    """A batch of products with one shared 2-D right operand (a linear layer's weight) as
    the single product of the stacked rows -- (batch... * M) x K times K x N, the same
    numbers -- when a and c can be viewed that way without a copy; otherwise as given.
    (A suspect's row index is then the row of the stacked rows.)"""
    if a.dim() > 2 and b.dim() == 2 and a.is_contiguous() and c.is_contiguous():
        return a.reshape(-1, a.shape[-1]), b, c.reshape(-1, c.shape[-1])
    return a, b, c


def guard(sample: float = 1.0, on_fail: str = "raise", **kwargs) -> Guard:
    """Verify ``torch.matmul``, ``@``, ``mm``, ``bmm`` and ``nn.functional.linear``
    calls made inside the block (or the decorated function).

    ``sample``: fraction of calls checked (randomly chosen).  ``on_fail``:
    ``"raise"`` a :class:`ProductCheckError`, ``"warn"`` (a
    :class:`ProductCheckWarning`) or ``"log"`` (logger ``kcontract.freivalds``).
    Keyword options: ``seed``, ``accumulate``, ``false_alarm``, ``max_rows``,
    ``cache_weights``, ``bound``, ``logger``.  ``guard.stats`` counts calls, checked,
    failed, skipped and the seconds spent checking.
    """
    return Guard(sample, on_fail, **kwargs)
