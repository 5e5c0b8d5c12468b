"""The op interface: calling convention, float64 oracle, shape symbols, inputs.

An :class:`Op` is a pure description; it never runs a kernel.  Kernels are
called as ``kernel(*[inputs in op.inputs order], **op.kwargs)`` with arrays of
the kernel's framework.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ..formats import Format, get_format
from .families import get_family

Shape = Mapping[str, int]


@dataclass
class Op:
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
    #: the axis of the output (and of every input) along which rows are independent
    row_inputs: tuple[str, ...] = ()
    summary: str = ""

    # -- shapes -----------------------------------------------------------------
    def input_shapes(self, s: Shape) -> dict[str, tuple]:
        raise NotImplementedError

    def output_shape(self, s: Shape) -> tuple:
        raise NotImplementedError

    def call_kwargs(self, dtype: Format) -> dict:
        """Keyword arguments a kernel of this op is called with at ``dtype``
        (passed only when the kernel's signature accepts them)."""
        return dict(self.kwargs)

    def solve_shape(self, x: Mapping[str, np.ndarray]) -> dict[str, int]:
        """The shape symbols of concrete inputs (each symbol read off its first use)."""
        sizes = {sym: 1000 + i for i, sym in enumerate(self.symbols)}
        layout = self.input_shapes(sizes)
        inv = {v: k for k, v in sizes.items()}
        out: dict[str, int] = {}
        for name, dims in layout.items():
            for d, size in zip(dims, np.shape(x[name])):
                out.setdefault(inv[d], int(size))
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
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(values, dtype=np.float64).astype(storage)

    def select_rows(self, x: Mapping[str, np.ndarray], rows) -> dict[str, np.ndarray]:
        """The inputs restricted to some rows (for batch-invariance checks)."""
        return {k: (v[rows] if k in self.row_inputs else v) for k, v in x.items()}

    def output_rows(self, out: np.ndarray, rows) -> np.ndarray:
        return out[rows]

    def num_rows(self, s: Shape) -> int:
        return self.output_shape(s)[0]

    def describe_shape(self, s: Shape) -> str:
        return ",".join(f"{k}={s[k]}" for k in self.symbols if k in s)


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
