"""Elementwise ops: gelu (erf form) and cast (float32 -> the target format)."""
from __future__ import annotations

import numpy as np

from ._math import gelu
from .base import RowsOp
from .families import get_family
from ..formats import get_format

_ELEM = ({"R": 1, "N": 1}, {"R": 7, "N": 13}, {"R": 3, "N": 127}, {"R": 16, "N": 256},
         {"R": 5, "N": 1000}, {"R": 64, "N": 33})


Elementwise = RowsOp


class Gelu(Elementwise):
    def oracle(self, x, **kw):
        return gelu(x["x"])

    def quantities(self, x, ref, **kw):
        # |x|: 1 + erf(x/sqrt2) cancels for negative x, so a correct working-
        # precision evaluation has an absolute error of order u |x|, not u |gelu(x)|.
        return {"mag": np.abs(x["x"]) + np.abs(ref)}


class Cast(Elementwise):
    def call_kwargs(self, dtype):
        # the target format, for kernels whose signature takes ``dtype=``
        return {"dtype": dtype.name}

    def input_format(self, name, dtype):
        return np.float32

    def generate(self, s, dtype, family, rng):
        # Values drawn on the *target* format's scale (its subnormals, its max).
        vals = get_family(family)((s["R"], s["N"]), rng, dtype)
        if family in ("normal", "uniform", "rand", "positive"):
            vals = vals * min(dtype.max / 8, 1e4)
        return {"x": self._store(vals, np.float32)}

    def oracle(self, x, **kw):
        return np.asarray(x["x"], dtype=np.float64)


OPS = [
    Gelu(name="gelu", inputs=("x",), symbols=("R", "N"), basic_shape={"R": 16, "N": 1024},
         shape_class=_ELEM, row_inputs=("x",), summary="gelu(x): the erf form, elementwise"),
    Cast(name="cast", inputs=("x",), symbols=("R", "N"), basic_shape={"R": 16, "N": 1024},
         shape_class=_ELEM, row_inputs=("x",),
         summary="cast(x): float32 in, the target dtype (--dtype) out, round-to-nearest-even"),
]
