"""rmsnorm: root-mean-square normalisation over the last axis (LLaMA-style).

``rmsnorm(x, weight, eps=1e-6) = x / sqrt(mean(x**2) + eps) * weight`` over the last
axis of x (R, N); weight (N,).  No centring, so no cancellation: the mean square is a
sum of n non-negative terms, whose rounding error is relative to the sum itself.
"""
from __future__ import annotations

import numpy as np

from .base import RowsOp
from .families import get_family

# 33 x 33 is square: reducing over the wrong axis there keeps the output's shape
_ROWS = ({"R": 1, "N": 1}, {"R": 7, "N": 13}, {"R": 3, "N": 127}, {"R": 16, "N": 256},
         {"R": 5, "N": 1000}, {"R": 2, "N": 4099}, {"R": 31, "N": 64}, {"R": 33, "N": 33})


class RMSNorm(RowsOp):
    #: each output element depends on its whole row of x (for diagnoses that trace a
    #: non-finite output back to the input that carried it)

    def input_shapes(self, s):
        return {"x": (s["R"], s["N"]), "weight": (s["N"],)}

    def generate(self, s, dtype, family, rng):
        n = s["N"]
        base = get_family("normal")
        return {"x": self._store(get_family(family)((s["R"], n), rng, dtype), dtype.dtype),
                "weight": self._store(1.0 + 0.25 * base((n,), rng, dtype), dtype.dtype)}

    @staticmethod
    def _inv_rms(x, eps):
        with np.errstate(all="ignore"):
            return 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)

    def oracle(self, x, eps=1e-6, **kw):
        with np.errstate(all="ignore"):
            return x["x"] * self._inv_rms(x["x"], eps) * x["weight"]

    def quantities(self, x, ref, eps=1e-6, **kw):
        # mag: |x w| / rms, the output's own magnitude: every error of the statistics is
        # relative (the mean square has no cancellation) and reaches out through it
        return {"mag": np.abs(ref)}

    def select_rows(self, x, rows):
        return {"x": x["x"][rows], "weight": x["weight"]}


OPS = [
    RMSNorm(name="rmsnorm", inputs=("x", "weight"), symbols=("R", "N"), reduction=("N",),
            kwargs={"eps": 1e-6}, basic_shape={"R": 16, "N": 512}, shape_class=_ROWS,
            row_inputs=("x",),
            summary="rmsnorm(x, weight, eps=1e-6): x / sqrt(mean(x**2) + eps) * weight over "
                    "the last axis"),
]
