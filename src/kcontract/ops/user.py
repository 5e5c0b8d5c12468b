"""User-defined ops: :func:`define_op` builds an :class:`~.base.Op` from plain data and
numpy functions, with the optional capabilities the generic contracts use."""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from ..errors import UsageError
from ..formats import Format
from .base import Lacks, Op, Reorder

_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


@dataclass
class UserOp(Op):
    """An op defined with :func:`define_op`: shapes are tuples of symbol names, the
    oracle and the optional capabilities are numpy functions called with the inputs in
    order (float64) and the op's keyword arguments."""

    input_symbols: Mapping[str, tuple] = field(default_factory=dict)
    output_symbols: tuple = ()
    oracle_fn: Optional[Callable] = None
    magnitude_fn: Optional[Callable] = None
    conditioning_fn: Optional[Callable] = None
    policy_fn: Optional[Callable] = None
    subnormal_fn: Optional[Callable] = None
    overflow_fn: Optional[Callable] = None
    input_dtypes: Mapping[str, str] = field(default_factory=dict)

    def _args(self, x):
        return [x[n] for n in self.inputs]

    def input_shapes(self, s):
        return {k: tuple(int(s[d]) for d in dims) for k, dims in self.input_symbols.items()}

    def output_shape(self, s):
        return tuple(int(s[d]) for d in self.output_symbols)

    def symbolic_inputs(self):
        return {k: tuple(v) for k, v in self.input_symbols.items()}

    def symbolic_output(self):
        return tuple(self.output_symbols)

    def input_format(self, name, dtype: Format):
        if name in self.input_dtypes:
            return np.dtype(self.input_dtypes[name])
        return dtype.dtype

    def oracle(self, x, **kw):
        with np.errstate(all="ignore"):
            return np.asarray(self.oracle_fn(*self._args(x), **kw), dtype=np.float64)

    def quantities(self, x, ref, **kw):
        with np.errstate(all="ignore"):
            mag = (np.abs(ref) if self.magnitude_fn is None else
                   np.asarray(self.magnitude_fn(*self._args(x), **kw), dtype=np.float64))
            cond = (1.0 if self.conditioning_fn is None else
                    np.asarray(self.conditioning_fn(*self._args(x), **kw), dtype=np.float64))
        return {"mag": mag, "cond": cond}

    def policy_reference(self, x, policy, **kw):
        if self.policy_fn is None:
            return super().policy_reference(x, policy, **kw)
        with np.errstate(all="ignore"):
            ref = np.asarray(self.policy_fn(*self._args(x), policy=policy, **kw), dtype=np.float64)
        return ref, x, {"alt": np.zeros_like(ref), "has_alt": np.zeros_like(ref)}

    def subnormal_inputs(self, shape, fmt, kind, rng):
        if self.subnormal_fn is None:
            return super().subnormal_inputs(shape, fmt, kind, rng)
        return self.subnormal_fn(shape, fmt, kind, rng)

    def overflow_inputs(self, shape, dtype, rng):
        if self.overflow_fn is None:
            return super().overflow_inputs(shape, dtype, rng)
        return self.overflow_fn(shape, dtype, rng)

    def num_rows(self, s):
        if self.batch_symbol:
            return int(s[self.batch_symbol])
        return super().num_rows(s)


def _check_syms(what: str, dims) -> tuple:
    import re
    if isinstance(dims, str) or not isinstance(dims, (tuple, list)):
        raise UsageError(f"define_op: {what} must be a tuple of symbol names, got {dims!r}")
    for d in dims:
        if not isinstance(d, str) or not re.match(_NAME, d):
            raise UsageError(f"define_op: {what}: {d!r} is not a symbol name")
    return tuple(dims)


def _default_shapes(symbols: Sequence[str], reduction: Sequence[str]):
    """A benchmarked shape (16, reductions 256) and a held-out class of odd, prime,
    degenerate and long-reduction shapes."""
    def shape(other: int, red: int) -> dict:
        return {s: (red if s in reduction else other) for s in symbols}
    basic = shape(16, 256)
    held = (shape(1, 1), shape(3, 7), shape(5, 127), shape(2, 1000), shape(17, 33), basic)
    return basic, held


def define_op(name: str, inputs: Mapping[str, Sequence[str]], output: Sequence[str],
              oracle: Callable, reduction: Sequence[str] = (), *,
              kwargs: Optional[Mapping[str, Any]] = None,
              magnitude: Optional[Callable] = None, conditioning: Optional[Callable] = None,
              batch: Optional[str] = None, reorder: Any = None,
              approximations: Optional[Mapping[str, Callable]] = None,
              policy_reference: Optional[Callable] = None,
              subnormal_inputs: Optional[Callable] = None,
              overflow_inputs: Optional[Callable] = None,
              injection_inputs: Sequence[str] = (),
              input_dtypes: Optional[Mapping[str, str]] = None,
              basic_shape: Optional[Mapping[str, int]] = None,
              shape_class: Optional[Sequence[Mapping[str, int]]] = None,
              normalised_rows: bool = False, summary: str = "") -> Op:
    """Define an op the checker can check kernels of.

    ``inputs``: input name -> shape as a tuple of symbol names, in the kernel's argument
    order; ``output``: the output's shape in symbols; ``oracle(*inputs, **kwargs)``: the
    float64 reference (numpy, on float64 inputs); ``reduction``: the symbols whose product
    is the reduction length ``n`` of the tolerances.  Optional capabilities:

    - ``kwargs``: keyword arguments the kernel is called with (and the oracle);
    - ``magnitude(*inputs, **kwargs)``: the error scale ``mag`` of the tolerances
      (default ``|ref|``), e.g. ``|a| @ |b|`` for a product;
    - ``conditioning(*inputs, **kwargs)``: the op's condition number ``cond``, which
      multiplies the accumulation term of the generic C-PRC-01 (default 1);
    - ``batch``: the symbol of independent rows (C-ORD-03 batch invariance);
    - ``reorder``: True (the input axes of the single reduction symbol, permuted together,
      and the output's axis when the output has it) or a mapping input -> axis (C-ORD-01);
      only for ops whose result does not depend on the order of the reduction index;
    - ``approximations``: claim value -> ``fn(*inputs, **kwargs)``, an accepted reference
      when ``approximation=<value>`` is declared;
    - ``policy_reference(*inputs, policy=, **kwargs)``: the reference under a ``nan`` policy
      (default: ``mask`` treats a non-finite input as absent, a zero; ``propagate`` is the
      IEEE float64 oracle);
    - ``subnormal_inputs(shape, fmt, kind, rng)``, ``overflow_inputs(shape, dtype, rng)``:
      crafted probe inputs (C-PRC-03; C-EXC-01's overflow cases);
    - ``injection_inputs``: the inputs NaN/Inf are injected into (default: the first);
    - ``input_dtypes``: input name -> fixed storage dtype (e.g. ``float32`` weights);
    - ``basic_shape``, ``shape_class``: the benchmarked shape and the held-out shapes
      (C-CMP-03); defaults: 16 per symbol and 256 per reduction symbol, and odd, prime,
      degenerate and long-reduction shapes;
    - ``normalised_rows``: the output's rows carry a common normaliser (softmax-like).
    """
    import re
    if not isinstance(name, str) or not re.match(_NAME, name):
        raise UsageError(f"define_op: name must be an identifier, got {name!r}")
    if not isinstance(inputs, Mapping) or not inputs:
        raise UsageError("define_op: inputs must be a non-empty mapping name -> (symbols...)")
    ins = {}
    for k, dims in inputs.items():
        if not isinstance(k, str) or not re.match(_NAME, k):
            raise UsageError(f"define_op: input name {k!r} is not an identifier")
        ins[k] = _check_syms(f"the shape of input {k!r}", dims)
    out = _check_syms("output", output)
    symbols = tuple(dict.fromkeys([d for dims in ins.values() for d in dims] + list(out)))
    missing = [d for d in out if d not in {x for dims in ins.values() for x in dims}]
    if missing:
        raise UsageError(f"define_op: output symbols {missing} appear in no input's shape")
    if not callable(oracle):
        raise UsageError("define_op: oracle must be a function of the inputs (numpy, float64)")
    red = _check_syms("reduction", tuple(reduction))
    for r in red:
        if r not in symbols:
            raise UsageError(f"define_op: reduction symbol {r!r} is not a symbol of the op "
                             f"({', '.join(symbols)})")
    if batch is not None and batch not in out:
        raise UsageError(f"define_op: batch symbol {batch!r} must index the output "
                         f"({', '.join(out)})")
    if batch is not None and batch in red:
        raise UsageError(f"define_op: batch symbol {batch!r} is a reduction symbol")
    reorder_axes, out_axis = None, None
    if reorder is True:
        if len(red) != 1:
            raise UsageError("define_op: reorder=True needs exactly one reduction symbol; "
                             "give reorder={input: axis} instead")
        r = red[0]
        reorder_axes = {k: dims.index(r) - len(dims) for k, dims in ins.items() if r in dims}
        out_axis = out.index(r) - len(out) if r in out else None
    elif isinstance(reorder, Mapping):
        reorder_axes = {k: int(v) for k, v in reorder.items()}
        for k in reorder_axes:
            if k not in ins:
                raise UsageError(f"define_op: reorder names no input {k!r}")
    elif reorder not in (None, False):
        raise UsageError(f"define_op: reorder must be True or a mapping input -> axis, not "
                         f"{reorder!r}")
    for k in injection_inputs:
        if k not in ins:
            raise UsageError(f"define_op: injection_inputs names no input {k!r}")
    dflt_basic, dflt_class = _default_shapes(symbols, red)
    basic = dict(dflt_basic)
    basic.update(basic_shape or {})
    for k in list(basic_shape or {}) + [k for s in (shape_class or ()) for k in s]:
        if k not in symbols:
            raise UsageError(f"define_op: shape symbol {k!r} is not a symbol of the op "
                             f"({', '.join(symbols)})")
    approx = {}
    for key, fn in (approximations or {}).items():
        approx[key] = (lambda f: lambda x, **kw: f(*[x[n] for n in ins], **kw))(fn)
    return UserOp(
        name=name, inputs=tuple(ins), symbols=symbols, reduction=red, kwargs=dict(kwargs or {}),
        basic_shape=basic, shape_class=tuple(shape_class) if shape_class else dflt_class,
        quantity_names=("mag", "cond"), summary=summary or _summary(name, ins, out),
        reorder_axes=reorder_axes, reorder_output_axis=out_axis,
        injection_inputs=tuple(injection_inputs), approximations=approx,
        normalised_rows=normalised_rows, batch_symbol=batch, origin=_caller_origin(name),
        input_symbols=ins, output_symbols=out, oracle_fn=oracle, magnitude_fn=magnitude,
        conditioning_fn=conditioning, policy_fn=policy_reference, subnormal_fn=subnormal_inputs,
        overflow_fn=overflow_inputs, input_dtypes=dict(input_dtypes or {}))


def _summary(name, ins, out) -> str:
    args = ", ".join(f"{k} ({','.join(v)})" for k, v in ins.items())
    return f"{name}({args}) -> ({','.join(out)}), user-defined"


def _caller_origin(name: str) -> Optional[str]:
    """``file.py:NAME`` of the file that called define_op (what ``--op`` resolves)."""
    frame = inspect.currentframe()
    try:
        caller = frame.f_back.f_back if frame and frame.f_back else None
        path = caller.f_code.co_filename if caller else ""
    finally:
        del frame
    return f"{path}:{name}" if path.endswith(".py") else None


__all__ = ["define_op", "UserOp", "Lacks", "Reorder"]
