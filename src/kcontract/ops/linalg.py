"""matmul and the fused linear_gelu."""
from __future__ import annotations

import math

import numpy as np

from ..formats import get_format, round_to
from ._math import gelu, gelu_sigmoid, gelu_slope, gelu_tanh
from .base import FingerprintProbe, Op, signs
from .families import get_family


def ieee_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The IEEE 754 float64 sum of products, independent of any BLAS: every term
    a[i,k] * b[k,j] formed, then summed (NaN from Inf*0 and Inf - Inf as IEEE says)."""
    with np.errstate(all="ignore"):
        terms = a[..., :, :, None] * b[..., None, :, :]
        return np.sum(terms, axis=-2)


class MatMul(Op):
    def input_shapes(self, s):
        batch = (s["B"],) if s.get("B", 0) else ()
        return {"a": batch + (s["M"], s["K"]), "b": batch + (s["K"], s["N"])}

    def output_shape(self, s):
        batch = (s["B"],) if s.get("B", 0) else ()
        return batch + (s["M"], s["N"])

    def symbolic_inputs(self):
        return {"a": ("B", "M", "K"), "b": ("B", "K", "N")}

    def symbolic_output(self):
        return ("B", "M", "N")

    def solve_shape(self, x):
        a, b = np.shape(x["a"]), np.shape(x["b"])
        s = {"M": a[-2], "K": a[-1], "N": b[-1], "B": 0}
        if len(a) == 3:
            s["B"] = a[0]
        return s

    def oracle(self, x, **kw):
        with np.errstate(all="ignore"):
            return np.matmul(x["a"], x["b"])

    def quantities(self, x, ref, **kw):
        with np.errstate(all="ignore"):
            return {"mag": np.matmul(np.abs(x["a"]), np.abs(x["b"]))}

    def select_rows(self, x, rows):
        # rows of the product are rows of a (the M axis)
        return {"a": x["a"][..., rows, :], "b": x["b"]}

    def output_rows(self, out, rows):
        return out[..., rows, :]

    def num_rows(self, s):
        return s["M"]

    def policy_reference(self, x, policy, **kw):
        # the IEEE sum of products, whatever BLAS does with Inf * 0
        ref, xq, extra = super().policy_reference(x, policy, **kw)
        return ieee_matmul(xq["a"], xq["b"]), xq, extra

    def overflow_inputs(self, shape, dtype, rng):
        fmax = float(self.output_format(dtype).max)
        M, K, N = shape["M"], shape["K"], shape["N"]
        s = np.where(np.arange(M) % 2 == 0, 1.0, -1.0)
        r = 2.0 ** np.linspace(-2.0, 2.0, M)
        sa = math.sqrt(fmax / K)
        # all-positive terms in a row (its sign applied to the whole row): the partial
        # sums grow monotonically, so overflow happens exactly where the result overflows
        a = (s * r)[:, None] * sa * rng.uniform(0.5, 1.5, (M, K))
        b = sa * rng.uniform(0.5, 1.5, (K, N))
        return {"a": self._store(a, self.input_format("a", dtype)),
                "b": self._store(b, self.input_format("b", dtype))}

    def subnormal_inputs(self, shape, fmt, kind, rng):
        fmt = get_format(fmt)
        shapes = self.input_shapes(shape)
        a, b = subnormal_operands(shapes["a"], shapes["b"], fmt, kind, rng)
        return {"a": self._store(a, fmt.dtype), "b": self._store(b, fmt.dtype)}


def subnormal_operands(sa, sb, fmt, kind, rng):
    """A product's subnormal probes, ``(a, b)`` of shapes ``sa``, ``sb``: ``inputs``,
    subnormal a times b ~ 2^(p-1), whose products are normal (reading a as zero gives 0);
    ``outputs``, a ~ 16 tiny times b ~ 2^-9, whose products and sums are subnormal."""
    if kind == "inputs":
        a = get_family("subnormal")(sa, rng, fmt)
        b = rng.uniform(1.0, 2.0, sb) * signs(rng, sb) * 2.0 ** (fmt.precision - 1)
    else:
        a = rng.uniform(1.0, 2.0, sa) * signs(rng, sa) * fmt.tiny * 2.0 ** 4
        b = rng.uniform(1.0, 2.0, sb) * signs(rng, sb) * 2.0 ** -9
    return a, b


def _zero_bias(call):
    """linear_gelu's kernel as ``call(a, b)``: a zero bias, so the probe sees x @ w."""
    return lambda a, b: call(a, b, np.zeros(b.shape[-1], dtype=b.dtype))


class LinearGelu(Op):
    def input_shapes(self, s):
        return {"x": (s["M"], s["K"]), "w": (s["K"], s["N"]), "b": (s["N"],)}

    def output_shape(self, s):
        return (s["M"], s["N"])

    def preactivation(self, x):
        with np.errstate(all="ignore"):
            return np.matmul(x["x"], x["w"]) + x["b"]

    def oracle(self, x, **kw):
        return gelu(self.preactivation(x))

    def quantities(self, x, ref, **kw):
        pre = self.preactivation(x)
        with np.errstate(all="ignore"):
            pre_mag = np.matmul(np.abs(x["x"]), np.abs(x["w"])) + np.abs(x["b"])
            slope = gelu_slope(pre)
        # mag: magnitude of the pre-activation the matmul error scales with;
        # slope: |gelu'| that carries that error into the output.
        return {"mag": pre_mag, "slope": slope, "pre": pre}

    def select_rows(self, x, rows):
        return {"x": x["x"][rows], "w": x["w"], "b": x["b"]}

    def subnormal_inputs(self, shape, fmt, kind, rng):
        """matmul's probes with a zero bias: ``inputs``, subnormal x times w ~ 2^(p-1), whose
        pre-activations and gelu (about pre / 2) are normal (reading x as zero gives
        gelu(0) = 0); ``outputs``, x ~ 16 tiny times w ~ 2^-9, whose products, sums and
        gelu values are subnormal."""
        fmt = get_format(fmt)
        shapes = self.input_shapes(shape)
        x, w = subnormal_operands(shapes["x"], shapes["w"], fmt, kind, rng)
        return {"x": self._store(x, fmt.dtype), "w": self._store(w, fmt.dtype),
                "b": self._store(np.zeros(shapes["b"]), fmt.dtype)}

    def fusion_emulations(self, x, dtype, approximation="none", **kw):
        pre = self.preactivation(x)
        declared_tanh = approximation == "tanh"
        out = []
        with np.errstate(all="ignore"):
            if declared_tanh:
                out.append(("the erf form of GELU (exact), not the declared tanh form", gelu(pre)))
            else:
                out.append(("the tanh approximation of GELU after the product", gelu_tanh(pre)))
            out.append(("the sigmoid approximation of GELU after the product", gelu_sigmoid(pre)))
            act = gelu_tanh if declared_tanh else gelu
            for f in ("tfloat32", "bfloat16", "float16"):
                if get_format(f).precision >= dtype.precision:
                    continue
                xr = {"x": round_to(x["x"], f), "w": round_to(x["w"], f), "b": x["b"]}
                out.append((f"the product computed with x and w rounded to {f}",
                            act(self.preactivation(xr))))
                out.append((f"the pre-activation rounded to {f} before GELU",
                            act(round_to(pre, f))))
        return out


OPS = [
    MatMul(
        name="matmul", inputs=("a", "b"), symbols=("B", "M", "K", "N"), reduction=("K",),
        basic_shape={"M": 64, "K": 128, "N": 64, "B": 0},
        shape_class=({"M": 1, "K": 1, "N": 1}, {"M": 7, "K": 13, "N": 5}, {"M": 33, "K": 127, "N": 17},
                     {"M": 64, "K": 128, "N": 64}, {"M": 128, "K": 96, "N": 40},
                     {"M": 3, "K": 1000, "N": 2}, {"M": 16, "K": 255, "N": 31},
                     {"B": 3, "M": 5, "K": 33, "N": 9}),
        quantity_names=("mag",), row_inputs=("a",),
        reorder_axes={"a": -1, "b": -2}, injection_inputs=("a", "b"),
        fingerprint=FingerprintProbe("inner_product", recipe="matmul"),
        summary="matmul(a, b): a (..., M, K), b (..., K, N) -> (..., M, N)"),
    LinearGelu(
        name="linear_gelu", inputs=("x", "w", "b"), symbols=("M", "K", "N"), reduction=("K",),
        basic_shape={"M": 32, "K": 128, "N": 64},
        shape_class=({"M": 1, "K": 1, "N": 1}, {"M": 7, "K": 13, "N": 5}, {"M": 33, "K": 127, "N": 17},
                     {"M": 32, "K": 128, "N": 64}, {"M": 5, "K": 300, "N": 3}),
        quantity_names=("mag", "slope", "pre"), row_inputs=("x",),
        reorder_axes={"x": -1, "w": -2},
        approximations={"tanh": lambda x, **kw: gelu_tanh(LinearGelu.preactivation(None, x))},
        fingerprint=FingerprintProbe("inner_product", adapt=_zero_bias,
                                     options={"positive": True, "growth": ()},
                                     recipe="linear_gelu"),
        summary="linear_gelu(x, w, b) = gelu(x @ w + b), erf form; oracle: the unfused composition"),
]
