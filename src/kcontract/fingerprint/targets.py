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
    #: the smallest exponent of a nonzero result the op shows as it is (None: any)
    floor: Optional[int] = None
    #: False: the op hides negative results (gelu)
    signed = True
    #: False: subnormal inputs or results cannot reach the output as they are
    subnormals = True
    #: a one-operand target whose kernel may round its terms (attention's v)
    term_operands = False
    #: binades the kernel's inputs sit above the terms
    headroom = 0

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

    def _mm(self, a, bt):
        return self._run(a, bt)

    def _dots(self, a, b):
        if b is None:
            b = np.ones_like(a)
        out = self._mm(self._store(a), self._store(b.T))
        if out.shape != (a.shape[0], a.shape[0]):
            raise ProbeFailure(f"the kernel returned shape {out.shape}, expected "
                               f"{(a.shape[0], a.shape[0])}")
        return np.diagonal(out.astype(np.float64)).copy()

    def grid(self, a, b):
        out = self._mm(self._store(a), self._store(b.T))
        return out.astype(np.float64).reshape(-1)


class LinearGeluTarget(MatmulTarget):
    """``linear_gelu(x, w, b) = gelu(x @ w + b)`` with a zero bias: gelu(v) == v for
    v >= 16 in every float format (1 - Phi(16) is below 2**-180) and gelu(0) == 0, so
    probes whose results are 0 or at least 16 read the product as it is; none makes a
    negative or a subnormal result."""

    name = "linear_gelu"
    floor = 4
    signed = False
    subnormals = False

    def _mm(self, a, bt):
        return self._run(a, bt, np.zeros(bt.shape[1], dtype=bt.dtype))


class AttentionTarget(Target):
    """The p @ v product of ``attention(q, k, v)``: with q = 0 every score is 0 and every
    probability exactly 1/T (T, the keys, a power of two: probes are padded with zero
    terms), so output column d is sum_t v[t, d] / T, a sum of the terms v / T.  Rows are
    columns of v; v = T * terms (``headroom``: T <= 2**11)."""

    name = "attention"
    operands = 1
    batch = 32
    term_operands = True
    subnormals = False
    headroom = 11
    min_keys = 256
    #: the head width of every p @ v call, whatever ``batch`` a stage asks (one code path)
    head_width = 32

    def _dots(self, a, b):
        R, K = a.shape
        # at least 256 keys: kernels take other code paths (and orders) for a few keys
        T = max(1 << max(int(K - 1).bit_length(), 0), self.min_keys)
        D = self.head_width  # one head width for every call: one code path
        if R > D:
            raise RuntimeError(f"{R} rows do not fit the attention probe's head width {D} "
                               "(a stage asked a batch wider than the head)")
        v = np.zeros((1, 1, T, D))
        v[0, 0, :K, :R] = a.T * T
        q = np.zeros((1, 1, 1, D))
        out = self._run(self._store(q), self._store(np.zeros((1, 1, T, D))), self._store(v))
        if out.size != D:
            raise ProbeFailure(f"the kernel returned shape {out.shape}, expected (1, 1, 1, {D})")
        return out.astype(np.float64).reshape(-1)[:R]

    def grid(self, a, b):
        return self.dots(a, None)

    #: the head width of the score probe (1/sqrt(D) = 1/4, exact)
    score_width = 16

    def scores(self, qa: np.ndarray, kb: np.ndarray, bits: Optional[int] = None):
        """The scores q . k / sqrt(D) of rows (qa[r], kb[r]) (D = 16), read through the
        softmax: two keys, k_0 = 0 (score 0) and k_1 = kb[r], v = (1, 0) in column 0, so
        out = 1 / (1 + exp(s)) and s = log(1/out - 1).  Returns the estimates and their
        resolution (16 ulps of the output at ``bits`` significand bits, the narrower of the
        output format and p @ v's accumulator, through the slope of the logistic)."""
        R, D = qa.shape
        q = np.zeros((R, 1, 1, D))
        q[:, 0, 0, :] = qa
        k = np.zeros((R, 1, 2, D))
        k[:, 0, 1, :] = kb
        v = np.zeros((R, 1, 2, D))
        v[:, 0, 0, 0] = 1.0
        out = self._run(self._store(q), self._store(k), self._store(v))
        bits = min(bits or 64, get_format(self.output_format).precision)
        if out.shape != (R, 1, 1, D):
            raise ProbeFailure(f"the kernel returned shape {out.shape}, expected {(R, 1, 1, D)}")
        o = out.astype(np.float64)[:, 0, 0, 0]
        with np.errstate(all="ignore"):
            est = np.log(1.0 / o - 1.0)
            step = 2.0 ** (np.floor(np.log2(np.abs(o))) - bits + 1)
            tol = 16.0 * step / (o * (1.0 - o))
        return est, tol


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
                            "sum": SumTarget, "linear_gelu": LinearGeluTarget,
                            "attention": AttentionTarget}


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
        return probe_output(self.handle.call(list(arrays), self.kwargs))


def probe_output(res) -> np.ndarray:
    """A probe call's output (a :class:`~kcontract.check.engine.CallResult`) as an array;
    :class:`ProbeFailure` when the call failed, returned nothing or raised an integrity
    flag (the probes judge values only a well-behaved call gives)."""
    from ..check.engine import INTEGRITY_MESSAGES
    if not res.ok:
        raise ProbeFailure(res.describe())
    if res.out is None:
        raise ProbeFailure("the kernel returned nothing")
    for flag in res.flags:
        kind, _, what = flag.partition(":")
        if kind in INTEGRITY_MESSAGES:
            raise ProbeFailure(INTEGRITY_MESSAGES[kind].format(what))
    return np.asarray(res.out)


__all__ = ["Target", "MatmulTarget", "ScaledMatmulTarget", "SumTarget", "LinearGeluTarget",
           "AttentionTarget", "TARGETS", "target_for", "KernelCaller", "probe_output",
           "ProbeFailure"]
