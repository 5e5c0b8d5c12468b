"""The op interface: calling convention, float64 oracle, shape symbols, inputs, and the
capabilities the measurement protocols ask an op for.

An :class:`Op` is a pure description; it never runs a kernel.  Kernels are called as
``kernel(*[inputs in op.inputs order], **op.kwargs)`` with arrays of the kernel's
framework.

Capabilities
------------
Everything a protocol or a signature detector needs to know about one op is asked of the
op, never decided by its name.  An op answers with a value, or with :class:`Lacks` (falsy,
naming the capability and why) when it has none; a protocol that needs a capability the
op lacks returns an explicit ``skipped`` verdict that names it.  The capabilities, with
the classes that use them (``docs/ops.md`` has the full guide):

=========================  ==========================================  ==================
capability                 what the op provides                        used by
=========================  ==========================================  ==================
``inputs``/``symbols``,    calling convention, shapes in symbols       every class
``input_shapes``,
``output_shape``
``oracle``                 the float64 reference                       every class
``quantities``             tolerance magnitudes (``mag``, ``cond``,    every tolerance
                           and op-specific ones)
``reduction``              symbols whose product is the reduction      tolerances (``n``)
                           length
``reorder(kwargs)``        input axes carrying the reduction index     C-ORD-01
                           (:class:`Reorder`)
``batch_rows()``           rows that are independent (``row_inputs``,  C-ORD-03
                           ``select_rows``, ``output_rows``,
                           ``num_rows``; or ``batch_symbol``)
``basic_shape``,           benchmarked shape and held-out shape class  C-CMP-03
``shape_class``
``emulations(x, fmt)``     the op with operands (or intermediates)     C-PRC-01/04
                           narrowed to ``fmt``                         detectors
``fingerprint``            an order-independent probe of the recipe    C-PRC-01/04
                           (:class:`FingerprintProbe`)
``fusion_emulations``      compositions a fused kernel may compute     C-CMP-01
                           instead (approximations, narrowed stages)
``approximations``         accepted approximate references by claim    C-CMP-01
                           value (``approximation=tanh``)
``normalised_rows``        output rows carry a normaliser (softmax)    C-CMP-01, C-EXC-01
``policy_reference``       the reference under a ``nan`` policy        C-EXC-01
``injection_inputs``       inputs NaN/Inf are injected into            C-EXC-01
``overflow_inputs``        finite inputs whose results overflow        C-EXC-01
``depends_on``             which input elements an output element      C-EXC-01
                           depends on (default: from the symbols)
``subnormal_inputs``       crafted subnormal probes (``inputs``,       C-PRC-03
                           ``outputs``, ``intermediates``)
``conversion``             the op is a format conversion               C-PRC-04 (cast)
``gather``                 table/indices inputs (:class:`Gather`)      C-EXC-02
``unstable_formulation``   the known unstable formulations             C-PRC-02 detector
``conditioning_quantity``  the quantity that is a condition number     C-PRC-02 detector
``conditioning_sweep``     the same rows at a growing condition        C-PRC-02 detector
                           number (the growth fit across cases)
=========================  ==========================================  ==================
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

import numpy as np

from ..formats import Format, get_format, round_to
from .families import get_family

Shape = Mapping[str, int]

#: the quantities every op provides to tolerance expressions (besides its own)
GENERIC_QUANTITIES = ("mag", "cond")


@dataclass(frozen=True)
class Lacks:
    """An op's answer when it lacks a capability: falsy, and says which and why."""

    capability: str
    reason: str = ""

    def __bool__(self) -> bool:
        return False

    def message(self, op_name: str) -> str:
        text = f"op {op_name!r} does not declare the capability '{self.capability}'"
        return text + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class Reorder:
    """Where an op's reduction index lives: the input axes that carry it (permuting them
    together leaves the exact result unchanged) and the output axis that carries it too
    (None: the output does not depend on the order of the index at all)."""

    inputs: Mapping[str, int]
    output_axis: Optional[int] = None


@dataclass(frozen=True)
class FingerprintProbe:
    """An order-independent probe of the recipe (operand x accumulator format) a kernel of
    this op runs.  ``kind`` names a probe of :mod:`kcontract.classes.fingerprint` by the
    computation it probes: ``inner_product`` (``call(a, b)`` computes ``a @ b``),
    ``row_sum`` (``call(x)`` sums the last axis), ``attention_pv`` (``call(q, k, v)``:
    the product of the probabilities with ``v``).  ``adapt`` turns the kernel's
    ``call(*inputs)`` into the probe's call signature (None: as is); ``options`` go to the
    probe; ``covers_operands``: False when the probe sees only some operands (attention's
    p @ v probe cannot see q and k), so an emulation is tried as well.  ``recipe``: the
    :mod:`kcontract.fingerprint` target whose staged recovery a failing C-PRC-01/04 runs
    on the kernel (called with the op's own inputs; ``recipe_adapt`` turns them into the
    target's call, None: as is); ``kind`` may then be empty (no fixed-list probe)."""

    kind: str
    adapt: Optional[Callable[[Callable], Callable]] = None
    options: Mapping[str, Any] = field(default_factory=dict)
    covers_operands: bool = True
    recipe: Optional[str] = None
    recipe_adapt: Optional[Callable[[Callable], Callable]] = None


@dataclass(frozen=True)
class Gather:
    """An op that gathers rows of ``table`` at ``indices`` (``count``: the symbol of the
    number of indices): what the out-of-bounds protocol (C-EXC-02) needs."""

    table: str
    indices: str
    count: str


@dataclass
class Op:
    """One op: its calling convention, float64 oracle, and capabilities (see the module
    docstring).  Subclasses override the methods; :func:`kcontract.define_op` builds one
    from plain data and numpy functions."""

    name: str
    inputs: tuple[str, ...]
    symbols: tuple[str, ...]
    #: the symbol (or product of symbols) that is the reduction length, for tolerances
    reduction: tuple[str, ...] = ()
    #: keyword arguments the kernel is called with by default
    kwargs: dict = field(default_factory=dict)
    #: the one fixed shape of the basic functional test (what naive benchmarks use)
    basic_shape: dict = field(default_factory=dict)
    #: the declared shape class: a small sweep of odd, prime, degenerate and large shapes
    shape_class: tuple = ()
    #: names of the extra quantities :meth:`quantities` provides to expressions
    quantity_names: tuple[str, ...] = ("mag",)
    #: the inputs whose leading (row) axis holds independent rows (batch invariance)
    row_inputs: tuple[str, ...] = ()
    summary: str = ""
    # -- capabilities as data (None / empty: the op lacks it) ------------------------
    #: C-ORD-01: input name -> axis carrying the reduction index
    reorder_axes: Optional[Mapping[str, int]] = None
    #: C-ORD-01: the output axis that carries the reduction index too (softmax), or None
    reorder_output_axis: Optional[int] = None
    #: C-EXC-01: inputs NaN/Inf are injected into (the first gets every probe, the others
    #: one probe each); empty: the first floating-point input
    injection_inputs: tuple[str, ...] = ()
    #: C-CMP-01: approximation claim value -> fn(x, **kwargs), the accepted reference
    approximations: Mapping[str, Callable] = field(default_factory=dict)
    #: the output's rows (last axis) carry a common normaliser (softmax)
    normalised_rows: bool = False
    #: C-PRC-01/04: the fingerprint probe, or None
    fingerprint: Optional[FingerprintProbe] = None
    #: C-EXC-02: the gather structure, or None
    gather: Optional[Gather] = None
    #: C-PRC-04 (conversion_probe): the op converts its float32 input to the kernel's dtype
    conversion: bool = False
    #: C-PRC-02 detector: the quantity that is the op's condition number (layernorm: kappa)
    conditioning_quantity: Optional[str] = None
    #: C-ORD-03 without row_inputs: the symbol that indexes independent rows
    batch_symbol: Optional[str] = None
    #: C-EXC-02 for an op whose out-of-range inputs are not rows gathered from a table (a
    #: class attribute, not a field: ``bound(inputs)``, ``with_index(...)``, ``expected(...)``;
    #: see ``ops/cross_entropy.py``), or None
    index_policy = None
    #: where a user-defined op comes from (``path/ops.py:NAME``, ``module:NAME``), or None
    origin: Optional[str] = None

    # -- shapes -----------------------------------------------------------------
    def input_shapes(self, s: Shape) -> dict[str, tuple]:
        raise NotImplementedError

    def output_shape(self, s: Shape) -> tuple:
        raise NotImplementedError

    def call_kwargs(self, dtype: Format) -> dict:
        """Keyword arguments a kernel of this op is called with at ``dtype``
        (passed only when the kernel's signature accepts them)."""
        return dict(self.kwargs)

    def symbolic_inputs(self) -> dict[str, tuple]:
        """Each input's dims as symbol names (None for a dim that is not one symbol)."""
        return self._symbolic(self.input_shapes)

    def symbolic_output(self) -> tuple:
        return self._symbolic(lambda s: {"out": self.output_shape(s)})["out"]

    def _symbolic(self, fn) -> dict:
        sizes = {sym: 1000 + i for i, sym in enumerate(self.symbols)}
        inv = {v: k for k, v in sizes.items()}
        return {k: tuple(inv.get(d) for d in dims) for k, dims in fn(sizes).items()}

    def solve_shape(self, x: Mapping[str, np.ndarray]) -> dict[str, int]:
        """The shape symbols of concrete inputs (each symbol read off its first use)."""
        out: dict[str, int] = {}
        for name, dims in self.symbolic_inputs().items():
            for d, size in zip(dims, np.shape(x[name])):
                if d is not None:
                    out.setdefault(d, int(size))
        return out

    def reduction_length(self, s: Shape) -> int:
        n = 1
        for sym in self.reduction:
            n *= int(s[sym])
        return n

    def full_shape(self, s: Shape) -> dict[str, int]:
        """Fill unspecified symbols from the basic shape."""
        out = dict(self.basic_shape)
        out.update({k: int(v) for k, v in s.items()})
        return out

    # -- formats ----------------------------------------------------------------
    def input_format(self, name: str, dtype: Format):
        """Storage dtype of input ``name`` when the kernel runs at ``dtype``."""
        return dtype.dtype

    def output_format(self, dtype: Format) -> Format:
        return dtype

    # -- numerics ---------------------------------------------------------------
    def oracle(self, x: Mapping[str, np.ndarray], **kw) -> np.ndarray:
        """The float64 reference on the (already rounded) inputs."""
        raise NotImplementedError

    def quantities(self, x: Mapping[str, np.ndarray], ref: np.ndarray, **kw) -> dict:
        """Op-specific magnitudes the tolerance expressions use (``mag`` at least)."""
        return {"mag": np.abs(ref)}

    def tolerance_quantities(self, x: Mapping[str, np.ndarray], ref: np.ndarray,
                             **kw) -> dict:
        """:meth:`quantities` plus the generic ones every op provides: ``mag`` (default
        ``|ref|``) and ``cond`` (the op's condition number, default 1)."""
        q = {"mag": np.abs(ref), "cond": 1.0}
        q.update(self.quantities(x, ref, **kw))
        return q

    # -- inputs -----------------------------------------------------------------
    def generate(self, s: Shape, dtype: Format, family: str, rng: np.random.Generator,
                 ) -> dict[str, np.ndarray]:
        """Inputs in the kernel's storage dtypes, drawn from ``family``."""
        fam = get_family(family)
        out = {}
        for name, shape in self.input_shapes(s).items():
            st = self.input_format(name, dtype)
            fmt = get_format(st) if np.dtype(st).kind == "f" or np.dtype(st).name in (
                "bfloat16", "float8_e4m3fn", "float8_e5m2") else dtype
            vals = fam(shape, rng, fmt)
            out[name] = self._store(vals, st)
        return out

    @staticmethod
    def _store(values: np.ndarray, storage) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            return np.asarray(values, dtype=np.float64).astype(storage)

    # -- C-ORD-03: independent rows -------------------------------------------------
    def batch_rows(self):
        """True when the op has independent rows (``row_inputs`` or ``batch_symbol``);
        :class:`Lacks` otherwise."""
        if self.row_inputs or self.batch_symbol:
            return True
        return Lacks("batch_rows", "no batch axis declared (row_inputs or batch_symbol)")

    def _batch_axes(self) -> tuple[dict, int]:
        """(input -> axis of the batch symbol, output axis) from the symbolic shapes."""
        sym = self.batch_symbol
        ins = {k: dims.index(sym) for k, dims in self.symbolic_inputs().items() if sym in dims}
        return ins, self.symbolic_output().index(sym)

    def select_rows(self, x: Mapping[str, np.ndarray], rows) -> dict[str, np.ndarray]:
        """The inputs restricted to some rows (for batch-invariance checks)."""
        if self.batch_symbol and not self.row_inputs:
            axes, _ = self._batch_axes()
            return {k: (np.take(v, rows, axis=axes[k]) if k in axes else v)
                    for k, v in x.items()}
        return {k: (v[rows] if k in self.row_inputs else v) for k, v in x.items()}

    def output_rows(self, out: np.ndarray, rows) -> np.ndarray:
        if self.batch_symbol and not self.row_inputs:
            return np.take(out, rows, axis=self._batch_axes()[1])
        return out[rows]

    def num_rows(self, s: Shape) -> int:
        if self.batch_symbol and not self.row_inputs:
            return int(s[self.batch_symbol])
        return self.output_shape(s)[0]

    def describe_shape(self, s: Shape) -> str:
        return ",".join(f"{k}={s[k]}" for k in self.symbols if k in s)

    # -- C-ORD-01: reduction order --------------------------------------------------
    def reorder(self, kwargs: Mapping[str, Any]):
        """Where the reduction index lives (:class:`Reorder`) under the call's kwargs, or
        :class:`Lacks`."""
        if not self.reorder_axes:
            return Lacks("reorder", "no input axes carrying the reduction index declared "
                                    "(reorder_axes)")
        return Reorder(dict(self.reorder_axes), self.reorder_output_axis)

    # -- C-PRC-01/04: narrowed formats ----------------------------------------------
    def emulations(self, x: Mapping[str, np.ndarray], fmt: str,
                   **kw) -> list[tuple[str, np.ndarray]]:
        """The op computed (float64) with operands, or intermediates, rounded to ``fmt``:
        (what was narrowed, result).  Default: every floating-point operand rounded."""
        with np.errstate(all="ignore"):
            xr = {k: (round_to(v, fmt) if np.asarray(v).dtype.kind == "f" else v)
                  for k, v in x.items()}
            return [("operands", self.oracle(xr, **kw))]

    # -- C-CMP-01: fusion -----------------------------------------------------------
    def approximate(self, x: Mapping[str, np.ndarray], approximation: str, **kw):
        """The reference under a declared approximation (None: the op has no such
        approximation, its own oracle applies)."""
        fn = self.approximations.get(approximation)
        if fn is None:
            return None
        with np.errstate(all="ignore"):
            return fn(x, **kw)

    def fusion_emulations(self, x: Mapping[str, np.ndarray], dtype: Format,
                          approximation: str = "none", **kw) -> list[tuple[str, np.ndarray]]:
        """Compositions a fused kernel may have computed instead of the reference (label,
        float64), for the fusion detector.  Default: the operands narrowed to each
        narrower format (:meth:`emulations`)."""
        out = []
        for f in ("tfloat32", "bfloat16", "float16"):
            if get_format(f).precision < dtype.precision:
                for label, emul in self.emulations(x, f, **kw):
                    out.append((f"{label} rounded to {f}", emul))
        return out

    # -- C-EXC-01: exceptional values ------------------------------------------------
    def policy_reference(self, x: Mapping[str, np.ndarray], policy: str, **kw):
        """The float64 reference under the ``nan`` policy, on float64 inputs ``x``:
        ``(ref, xq, extra)``, ``xq`` the inputs the tolerance quantities come from,
        ``extra`` names that override or add to the quantities (``alt``/``has_alt``: a
        second accepted result).  Default ``mask``: a non-finite input element is absent,
        it contributes as a zero; ``propagate``/``raise``: the oracle (IEEE float64)."""
        if policy == "mask":
            fin = {k: (np.where(np.isfinite(v), v, 0.0) if v.dtype.kind == "f" else v)
                   for k, v in x.items()}
            with np.errstate(all="ignore"):
                ref = self.oracle(fin, **kw)
            return ref, fin, {"alt": np.zeros_like(ref), "has_alt": np.zeros_like(ref)}
        with np.errstate(all="ignore"):
            ref = self.oracle(x, **kw)
        return ref, x, {"alt": np.zeros_like(ref), "has_alt": np.zeros_like(ref)}

    def exceptional_targets(self) -> tuple[str, ...]:
        """The inputs NaN/Inf are injected into (:attr:`injection_inputs`, default: the
        first floating-point input)."""
        if self.injection_inputs:
            return tuple(self.injection_inputs)
        return (self.inputs[0],)

    def overflow_inputs(self, shape: Shape, dtype: Format, rng):
        """Finite inputs whose results overflow the output format (or that probe
        finite-in, finite-out at extreme magnitudes), or :class:`Lacks`."""
        return Lacks("overflow_inputs", "no overflow-provoking inputs declared")

    def depends_on(self, name: str, pos: tuple, idx: tuple) -> bool:
        """Whether output element ``idx`` depends on element ``pos`` of input ``name``:
        from the symbolic shapes, every symbol the input shares with the output that is
        not reduced must have the same index (dims aligned from the right)."""
        ins = self.symbolic_inputs().get(name, ())
        outs = self.symbolic_output()
        ins = ins[len(ins) - len(pos):] if len(ins) >= len(pos) else (None,) * len(pos)
        outs = outs[len(outs) - len(idx):] if len(outs) >= len(idx) else (None,) * len(idx)
        for d, p in zip(ins, pos):
            if d is None or d in self.reduction or d not in outs:
                continue
            if idx[outs.index(d)] != p:
                return False
        return True

    # -- C-PRC-03: subnormals -------------------------------------------------------
    def subnormal_inputs(self, shape: Shape, fmt: Format, kind: str, rng):
        """Crafted inputs for the subnormal probes: ``inputs`` (subnormal inputs whose
        results are normal) or ``outputs`` (normal inputs whose results are subnormal);
        None when that probe says nothing at this format; :class:`Lacks` when the op
        has no subnormal probes."""
        return Lacks("subnormal_inputs", "no subnormal probes declared")

    # -- C-PRC-02 detector -----------------------------------------------------------
    def unstable_formulation(self, failing: list[str], nonfinite: int,
                             exponent: Optional[float]) -> Optional[str]:
        """The unstable formulation a failure on input families ``failing`` (with
        ``nonfinite`` NaN/Inf outputs where the oracle is finite; ``exponent``: the error's
        growth exponent in :attr:`conditioning_quantity`) points to, or None."""
        return None

    def conditioning_sweep(self, shape: Shape, fmt: Format, rng):
        """C-PRC-02 detector: ``[(level, inputs), ...]``, the same rows at a growing
        :attr:`conditioning_quantity` (the best-conditioned first), across which the
        detector fits how the error grows; :class:`Lacks` when the op has none."""
        return Lacks("conditioning_sweep", "no conditioning sweep declared")

    @staticmethod
    def conditioning_growth_kind(exponent: float) -> str:
        """The fitted growth exponent in the condition number, by what predicts it:
        ``quadratic`` (about 2: a formulation whose cancellation squares the condition
        number, E[x²]−E[x]²), ``linear`` (about 1: any stable formulation, its constant set
        by the working precision), else ``other``."""
        if 1.6 <= exponent <= 2.6:
            return "quadratic"
        if 0.6 <= exponent <= 1.4:
            return "linear"
        return "other"

    # -- what the op declares --------------------------------------------------------
    def capabilities(self) -> dict[str, bool]:
        """Which of the optional capabilities this op has (for listings and docs)."""
        probe = self.subnormal_inputs(self.full_shape({}), get_format("float32"), "inputs",
                                      np.random.default_rng(0))
        over = self.overflow_inputs(self.full_shape({}), get_format("float32"),
                                    np.random.default_rng(0))
        return {"reorder": bool(self.reorder({k: v for k, v in self.kwargs.items()})),
                "batch_rows": bool(self.batch_rows()),
                "fingerprint": self.fingerprint is not None,
                "approximations": bool(self.approximations),
                "overflow_inputs": not isinstance(over, Lacks),
                "subnormal_inputs": not isinstance(probe, Lacks),
                "gather": self.gather is not None, "conversion": self.conversion}


class RowsOp(Op):
    """An op over (R, N) inputs ``x``: rows independent, the last axis reduced or mapped."""

    def input_shapes(self, s):
        return {"x": (s["R"], s["N"])}

    def output_shape(self, s):
        return (s["R"], s["N"])

    def num_rows(self, s):
        return s["R"]


def upcast(x: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs as float64 (exact for every supported format); integer arrays stay."""
    out = {}
    for k, v in x.items():
        v = np.asarray(v)
        out[k] = v if v.dtype.kind in "iu" else v.astype(np.float64)
    return out


def signs(rng, shape) -> np.ndarray:
    """Random signs, +1 or -1."""
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0)
