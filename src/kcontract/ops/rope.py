"""rope: rotary position embedding, the half-split (GPT-NeoX / LLaMA) convention.

``rope(x, cos, sin)`` with x (B, S, D), D = 2P even, and cos, sin (S, P) the cosine and
sine of each position's angles (theta[s, i] = s * 10000 ** (-2 i / D) in the inputs the
checker draws; the kernel receives the tables, it does not compute angles).  The
half-split convention pairs element i with element i + P (not 2i with 2i + 1, the
interleaved GPT-J convention):

    x1, x2 = x[..., :P], x[..., P:]
    out = concat(x1 * cos - x2 * sin, x2 * cos + x1 * sin)

B is any batch (batch x heads flattened).  Each output element is one difference or sum
of two products, so its rounding error is relative to |x1 cos| + |x2 sin| (``mag``).
"""
from __future__ import annotations

import numpy as np

from .base import Op
from .families import get_family


def angles(S: int, P: int, base: float = 10000.0) -> np.ndarray:
    """theta[s, i] = s * base ** (-i / P), float64 (S, P)."""
    inv = base ** (-np.arange(P, dtype=np.float64) / max(P, 1))
    return np.arange(S, dtype=np.float64)[:, None] * inv[None, :]


class Rope(Op):
    def input_shapes(self, s):
        return {"x": (s["B"], s["S"], 2 * s["P"]), "cos": (s["S"], s["P"]),
                "sin": (s["S"], s["P"])}

    def output_shape(self, s):
        return (s["B"], s["S"], 2 * s["P"])

    def solve_shape(self, x):
        B, S, _ = np.shape(x["x"])
        return {"B": int(B), "S": int(S), "P": int(np.shape(x["cos"])[-1])}

    def generate(self, s, dtype, family, rng):
        th = angles(s["S"], s["P"])
        return {"x": self._store(get_family(family)(self.input_shapes(s)["x"], rng, dtype),
                                 dtype.dtype),
                "cos": self._store(np.cos(th), dtype.dtype),
                "sin": self._store(np.sin(th), dtype.dtype)}

    @staticmethod
    def _halves(x):
        P = x["cos"].shape[-1]
        return x["x"][..., :P], x["x"][..., P:], x["cos"], x["sin"]

    def oracle(self, x, **kw):
        x1, x2, c, s = self._halves(x)
        with np.errstate(all="ignore"):
            return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)

    def quantities(self, x, ref, **kw):
        x1, x2, c, s = (np.abs(v) for v in self._halves(x))
        with np.errstate(all="ignore"):
            return {"mag": np.concatenate([x1 * c + x2 * s, x2 * c + x1 * s], axis=-1)}

    def select_rows(self, x, rows):
        return {"x": x["x"][rows], "cos": x["cos"], "sin": x["sin"]}

    def num_rows(self, s):
        return s["B"]

    def describe_shape(self, s):
        return ",".join(f"{k}={s[k]}" for k in self.symbols if k in s)


OPS = [
    Rope(name="rope", inputs=("x", "cos", "sin"), symbols=("B", "S", "P"),
         basic_shape={"B": 8, "S": 64, "P": 32},
         shape_class=({"B": 1, "S": 1, "P": 1}, {"B": 3, "S": 7, "P": 5},
                      {"B": 2, "S": 33, "P": 16}, {"B": 4, "S": 17, "P": 64},
                      {"B": 1, "S": 300, "P": 8}, {"B": 5, "S": 13, "P": 48}),
         row_inputs=("x",),
         summary="rope(x, cos, sin): x (B, S, 2P), cos, sin (S, P); half-split rotation "
                 "(x1 cos - x2 sin, x2 cos + x1 sin) with x1, x2 = x[..., :P], x[..., P:]"),
]
