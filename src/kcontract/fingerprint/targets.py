"""How probes reach a kernel: each op kind turns inner products into calls.

A probe is a batch of inner products ``sum_k a[r, k] * b[r, k]`` (rows r).  A
:class:`Target` knows how to make its op compute them and how to read them back
from the output, and says what it offers (:attr:`Target.operands`: 2 when both
factors are free, 1 when the op only sums terms), so that the recovery chooses
its probes by capability.  :data:`TARGETS` maps an op name to its target (one
line per op: ``scaled_matmul`` is a target calling with unit scales).
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..errors import UsageError
from ..formats import get_format


class ProbeFailure(Exception):
    """The kernel failed on a probe (raised, crashed, hung, returned no array, or broke
    an integrity rule): the fingerprint stops and says so."""


Call = Callable[..., np.ndarray]


class Target:
    name = "abstract"
    #: 2: both factors of each product are free; 1: the op sums given terms
    operands = 2
    #: inner products per call (a matmul computes them on the diagonal of a 32 x 32 tile)
    batch = 32
    #: rows and reduction lengths are padded with zeros to a multiple of this (fp8 matrix
    #: units such as torch._scaled_mm take only multiples of 16; zero products change no sum,
    #: but a longer reduction may take another code path, so only where the op needs it)
    pad = 1

    def __init__(self, call: Call, input_format: str):
        self.call = call
        self.input_format = get_format(input_format).name
        self.output_format: Optional[str] = None
        self.calls = 0

    def _store(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(x, dtype=np.float64).astype(get_format(self.input_format).dtype)

    def _run(self, *arrays) -> np.ndarray:
        self.calls += 1
        out = self.call(*arrays)
        if out is None:
            raise ProbeFailure("the kernel returned nothing")
        out = np.asarray(out)
        if out.dtype.kind not in "fV" and out.dtype.name not in ("bfloat16", "float8_e4m3fn",
                                                                 "float8_e5m2"):
            raise ProbeFailure(f"the kernel returned a {out.dtype} array, not floating point")
        self.output_format = get_format(out.dtype).name
        return out

    def dots(self, a: np.ndarray, b: Optional[np.ndarray]) -> np.ndarray:
        """The kernel's value of each row's inner product, float64."""
        a, b = self._padded(a), None if b is None else self._padded(b)
        out = []
        for r0 in range(0, a.shape[0], self.batch):
            n = min(self.batch, a.shape[0] - r0)
            rows = -(-n // self.pad) * self.pad
            blk_a = np.zeros((rows, a.shape[1]))
            blk_a[:n] = a[r0:r0 + n]
            blk_b = None
            if b is not None:
                blk_b = np.zeros((rows, b.shape[1]))
                blk_b[:n] = b[r0:r0 + n]
            out.append(self._dots(blk_a, blk_b)[:n])
        return np.concatenate(out)

    def _padded(self, x: np.ndarray) -> np.ndarray:
        K = x.shape[1]
        full = -(-K // self.pad) * self.pad
        return x if full == K else np.concatenate([x, np.zeros((x.shape[0], full - K))], axis=1)

    def grid(self, a: np.ndarray, b: Optional[np.ndarray]) -> np.ndarray:
        """Inner products of every row of ``a`` with every row of ``b`` (a random sweep
        uses all of them), flattened."""
        raise NotImplementedError

    def _dots(self, a, b) -> np.ndarray:
        raise NotImplementedError


class MatmulTarget(Target):
    """``matmul(a, b)``: row r of ``a`` times column r of ``b``, read off the diagonal
    of a square product (a tile shape matrix units run at, unlike a matrix-vector one)."""

    name = "matmul"

    def _dots(self, a, b):
        if b is None:
            b = np.ones_like(a)
        out = self._run(self._store(a), self._store(b.T))
        if out.shape != (a.shape[0], a.shape[0]):
            raise ProbeFailure(f"the kernel returned shape {out.shape}, expected "
                               f"{(a.shape[0], a.shape[0])}")
        return np.diagonal(out.astype(np.float64)).copy()

    def grid(self, a, b):
        out = self._run(self._store(a), self._store(b.T))
        return out.astype(np.float64).reshape(-1)


class ScaledMatmulTarget(MatmulTarget):
    """``scaled_matmul(a, b)`` with unit scales (fp8 GEMMs such as ``torch._scaled_mm``):
    a matmul whose shapes must be multiples of 16."""

    name = "scaled_matmul"
    pad = 16


class SumTarget(Target):
    """``sum(x)`` over the last axis: each row is one reduction of given terms."""

    name = "sum"
    operands = 1
    batch = 256

    def _dots(self, a, b):
        out = self._run(self._store(a))
        if out.shape != (a.shape[0],):
            raise ProbeFailure(f"the kernel returned shape {out.shape}, expected {(a.shape[0],)}")
        return out.astype(np.float64)

    def grid(self, a, b):
        return self._dots(a, None)


#: op name -> its target
TARGETS: dict[str, type] = {"matmul": MatmulTarget, "scaled_matmul": ScaledMatmulTarget,
                            "sum": SumTarget}


def target_for(op: str, call: Call, input_format: str) -> Target:
    if op not in TARGETS:
        raise UsageError(f"kcontract fingerprint has no probes for op {op!r}; it fingerprints: "
                         f"{', '.join(TARGETS)}")
    return TARGETS[op](call, input_format)


class KernelCaller:
    """Calls a kernel (``path.py:function`` or ``module:function``) in its own isolated
    worker process, like a check does; a failed call raises :class:`ProbeFailure`."""

    def __init__(self, kernel: str, *, framework: str = "numpy", device: str = "cpu",
                 timeout: float = 60.0, in_process: bool = False, kwargs: Optional[dict] = None):
        from ..check.sandbox import InProcessKernel, KernelProcess
        cls = InProcessKernel if in_process else KernelProcess
        self.handle = cls(kernel, framework=framework, device=device, timeout=timeout)
        self.kwargs = dict(kwargs or {})
        self.info: dict = {}

    def __enter__(self):
        from ..check.sandbox import KernelLoadError
        try:
            self.info = self.handle.start()
        except KernelLoadError as exc:
            if exc.spec_error:
                raise UsageError(str(exc)) from exc
            raise ProbeFailure(str(exc)) from exc
        return self

    def __exit__(self, *exc):
        self.handle.__exit__(*exc)

    def __call__(self, *arrays) -> np.ndarray:
        from ..check.engine import INTEGRITY_MESSAGES
        res = self.handle.call(list(arrays), self.kwargs)
        if not res.ok:
            raise ProbeFailure(res.describe())
        for flag in res.flags:
            kind, _, what = flag.partition(":")
            if kind in INTEGRITY_MESSAGES:
                raise ProbeFailure(INTEGRITY_MESSAGES[kind].format(what))
        return np.asarray(res.out)


__all__ = ["Target", "MatmulTarget", "ScaledMatmulTarget", "SumTarget", "TARGETS", "target_for", "KernelCaller",
           "ProbeFailure"]
