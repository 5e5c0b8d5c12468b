"""Reductions over the last axis: sum, softmax, layernorm."""
from __future__ import annotations

import numpy as np

from ._math import softmax
from .base import RowsOp
from .families import get_family

_ROWS = ({"R": 1, "N": 1}, {"R": 7, "N": 13}, {"R": 3, "N": 127}, {"R": 16, "N": 256},
         {"R": 5, "N": 1000}, {"R": 2, "N": 4099}, {"R": 31, "N": 64})


Rowwise = RowsOp


class Sum(Rowwise):
    def output_shape(self, s):
        return (s["R"],)

    def oracle(self, x, **kw):
        with np.errstate(all="ignore"):
            return np.sum(x["x"], axis=-1)

    def quantities(self, x, ref, **kw):
        with np.errstate(all="ignore"):
            return {"mag": np.sum(np.abs(x["x"]), axis=-1)}


class Softmax(Rowwise):
    def oracle(self, x, **kw):
        return softmax(x["x"])

    def quantities(self, x, ref, **kw):
        with np.errstate(all="ignore"):
            spread = np.max(x["x"], axis=-1, keepdims=True) - x["x"]
        # mag: the output itself (softmax errors are relative); spread: how far below
        # the row max each logit is (exp's argument, whose rounding scales with it).
        return {"mag": np.abs(ref), "spread": np.abs(spread)}


class LayerNorm(Rowwise):
    def input_shapes(self, s):
        return {"x": (s["R"], s["N"]), "weight": (s["N"],), "bias": (s["N"],)}

    def generate(self, s, dtype, family, rng):
        fam = get_family(family)
        base = get_family("normal")
        n = s["N"]
        return {
            "x": self._store(fam((s["R"], n), rng, dtype), dtype.dtype),
            "weight": self._store(1.0 + 0.25 * base((n,), rng, dtype), dtype.dtype),
            "bias": self._store(0.25 * base((n,), rng, dtype), dtype.dtype),
        }

    def _stats(self, x):
        with np.errstate(all="ignore"):
            mu = np.mean(x, axis=-1, keepdims=True)
            var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return mu, var

    def oracle(self, x, eps=1e-5, **kw):
        mu, var = self._stats(x["x"])
        with np.errstate(all="ignore"):
            return (x["x"] - mu) / np.sqrt(var + eps) * x["weight"] + x["bias"]

    def quantities(self, x, ref, eps=1e-5, **kw):
        mu, var = self._stats(x["x"])
        with np.errstate(all="ignore"):
            sd = np.sqrt(var + eps)
            kappa = np.mean(np.abs(x["x"]), axis=-1, keepdims=True) / sd
            xhat = np.abs(x["x"] - mu) / sd
        # kappa: the condition number of centring (mean|x| / std); a stable
        # formulation's error grows like kappa, E[x^2]-E[x]^2 like kappa^2.
        return {"mag": np.abs(x["weight"]) * (1.0 + xhat), "kappa": kappa, "xhat": xhat}

    def select_rows(self, x, rows):
        return {"x": x["x"][rows], "weight": x["weight"], "bias": x["bias"]}


OPS = [
    Sum(name="sum", inputs=("x",), symbols=("R", "N"), reduction=("N",),
        basic_shape={"R": 16, "N": 1024}, shape_class=_ROWS, row_inputs=("x",),
        summary="sum(x): over the last axis, (R, N) -> (R,)"),
    Softmax(name="softmax", inputs=("x",), symbols=("R", "N"), reduction=("N",),
            basic_shape={"R": 16, "N": 512}, shape_class=_ROWS, quantity_names=("mag", "spread"),
            row_inputs=("x",), summary="softmax(x): over the last axis"),
    LayerNorm(name="layernorm", inputs=("x", "weight", "bias"), symbols=("R", "N"),
              reduction=("N",), kwargs={"eps": 1e-5}, basic_shape={"R": 16, "N": 512},
              shape_class=_ROWS, quantity_names=("mag", "kappa", "xhat"), row_inputs=("x",),
              summary="layernorm(x, weight, bias, eps=1e-5): over the last axis"),
]
