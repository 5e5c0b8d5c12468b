"""matmul and the fused linear_gelu."""
from __future__ import annotations

import numpy as np

from ._math import gelu, gelu_slope
from .base import Op


class MatMul(Op):
    def input_shapes(self, s):
        batch = (s["B"],) if s.get("B", 0) else ()
        return {"a": batch + (s["M"], s["K"]), "b": batch + (s["K"], s["N"])}

    def output_shape(self, s):
        batch = (s["B"],) if s.get("B", 0) else ()
        return batch + (s["M"], s["N"])

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
        with np.errstate(all="ignore"):
            pre_mag = np.matmul(np.abs(x["x"]), np.abs(x["w"])) + np.abs(x["b"])
            slope = gelu_slope(self.preactivation(x))
        # mag: magnitude of the pre-activation the matmul error scales with;
        # slope: |gelu'| that carries that error into the output.
        return {"mag": pre_mag, "slope": slope, "pre": self.preactivation(x)}

    def select_rows(self, x, rows):
        return {"x": x["x"][rows], "w": x["w"], "b": x["b"]}


OPS = [
    MatMul(
        name="matmul", inputs=("a", "b"), symbols=("B", "M", "K", "N"), reduction=("K",),
        basic_shape={"M": 64, "K": 128, "N": 64, "B": 0},
        shape_class=({"M": 1, "K": 1, "N": 1}, {"M": 7, "K": 13, "N": 5}, {"M": 33, "K": 127, "N": 17},
                     {"M": 64, "K": 128, "N": 64}, {"M": 128, "K": 96, "N": 40},
                     {"M": 3, "K": 1000, "N": 2}, {"M": 16, "K": 255, "N": 31},
                     {"B": 3, "M": 5, "K": 33, "N": 9}),
        quantity_names=("mag",), row_inputs=("a",),
        summary="matmul(a, b): a (..., M, K), b (..., K, N) -> (..., M, N)"),
    LinearGelu(
        name="linear_gelu", inputs=("x", "w", "b"), symbols=("M", "K", "N"), reduction=("K",),
        basic_shape={"M": 32, "K": 128, "N": 64},
        shape_class=({"M": 1, "K": 1, "N": 1}, {"M": 7, "K": 13, "N": 5}, {"M": 33, "K": 127, "N": 17},
                     {"M": 32, "K": 128, "N": 64}, {"M": 5, "K": 300, "N": 3}),
        quantity_names=("mag", "slope", "pre"), row_inputs=("x",),
        summary="linear_gelu(x, w, b) = gelu(x @ w + b), erf form; oracle: the unfused composition"),
]
