"""Elementwise ops: gelu (erf form) and cast (float32 -> the target format)."""
from __future__ import annotations

import math

import numpy as np

from ._math import gelu, gelu_sigmoid, gelu_tanh
from .base import RowsOp, signs
from .families import get_family
from ..formats import get_format, round_to

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

    def policy_reference(self, x, policy, **kw):
        ref, xq, extra = super().policy_reference(x, policy, **kw)
        if policy != "mask":
            # At an infinite input gelu's value is a limit: x*Phi(x) gives +Inf at +Inf and
            # the indeterminate -Inf*0 = NaN at -Inf; the other accepted outcome is NaN at
            # +Inf (implementations whose erf meets Inf*0) and the limit 0 at -Inf.
            xs = x["x"]
            extra["alt"] = np.where(np.isposinf(xs), np.nan, np.where(np.isneginf(xs), -0.0, 0.0))
            extra["has_alt"] = np.where(np.isinf(xs), 1.0, 0.0)
        return ref, xq, extra

    def overflow_inputs(self, shape, dtype, rng):
        fmax = float(self.output_format(dtype).max)
        R, N = shape["R"], shape["N"]
        x = fmax * rng.uniform(1.0 / 64, 0.25, (R, N)) * np.where(rng.random((R, N)) < 0.5, -1, 1)
        return {"x": self._store(x, self.input_format("x", dtype))}

    def subnormal_inputs(self, shape, fmt, kind, rng):
        fmt = get_format(fmt)
        s = self.input_shapes(shape)["x"]
        x = get_family("subnormal")(s, rng, fmt) if kind == "inputs" else \
            rng.uniform(1.0, 1.99, s) * fmt.tiny * signs(rng, s)
        return {"x": self._store(x, fmt.dtype)}

    def fusion_emulations(self, x, dtype, approximation="none", **kw):
        v = x["x"]
        declared_tanh = approximation == "tanh"
        out = []
        with np.errstate(all="ignore"):
            if declared_tanh:
                out.append(("the erf form of GELU (exact), not the declared tanh form", gelu(v)))
            else:
                out.append(("the tanh approximation of GELU, 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))",
                            gelu_tanh(v)))
            out.append(("the sigmoid approximation of GELU, x*sigmoid(1.702x)", gelu_sigmoid(v)))
            act = gelu_tanh if declared_tanh else gelu
            for f in ("tfloat32", "bfloat16", "float16"):
                if get_format(f).precision < dtype.precision:
                    out.append((f"GELU evaluated in {f}", round_to(act(round_to(v, f)), dtype.name)))
        return out


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

    def overflow_inputs(self, shape, dtype, rng):
        fmt = self.output_format(dtype)
        fmax = float(fmt.max)
        R, N = shape["R"], shape["N"]
        f32max = float(np.finfo(np.float32).max)
        hi = min(16.0 * fmax, f32max)
        mags = np.exp(rng.uniform(math.log(fmax / 2), math.log(hi), (R, N)))
        flat = mags.reshape(-1)
        edges = [fmax, min(f32max, fmax * (1 + 2.0 ** -fmt.precision)), hi]
        flat[: len(edges)] = edges
        x = mags * np.where(rng.random((R, N)) < 0.5, -1.0, 1.0)
        x = np.minimum(np.abs(x), f32max) * np.sign(x)
        return {"x": self._store(x, np.float32)}

    def subnormal_inputs(self, shape, fmt, kind, rng):
        fmt = get_format(fmt)
        s = self.input_shapes(shape)["x"]
        if kind == "inputs" and fmt.emin != get_format("float32").emin:
            return None  # float32 subnormals round to zero in this format anyway
        x = get_family("subnormal")(s, rng, fmt)
        return {"x": self._store(x, np.float32)}


OPS = [
    Gelu(name="gelu", inputs=("x",), symbols=("R", "N"), basic_shape={"R": 16, "N": 1024},
         shape_class=_ELEM, row_inputs=("x",),
         approximations={"tanh": lambda x, **kw: gelu_tanh(x["x"])},
         summary="gelu(x): the erf form, elementwise"),
    Cast(name="cast", inputs=("x",), symbols=("R", "N"), basic_shape={"R": 16, "N": 1024},
         shape_class=_ELEM, row_inputs=("x",), conversion=True,
         summary="cast(x): float32 in, the target dtype (--dtype) out, round-to-nearest-even"),
]
