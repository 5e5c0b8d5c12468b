"""Scaled dot-product attention."""
from __future__ import annotations

import math

import numpy as np

from ._math import softmax
from .base import Op


def causal_mask(S: int, T: int) -> np.ndarray:
    """True where query i may attend key j: the mask aligned to the bottom-right
    corner (j <= i + T - S), as in FlashAttention and torch's ``causal_lower_right``."""
    i = np.arange(S)[:, None]
    j = np.arange(T)[None, :]
    return j <= i + (T - S)


class Attention(Op):
    def input_shapes(self, s):
        return {"q": (s["B"], s["H"], s["S"], s["D"]), "k": (s["B"], s["H"], s["T"], s["D"]),
                "v": (s["B"], s["H"], s["T"], s["D"])}

    def output_shape(self, s):
        return (s["B"], s["H"], s["S"], s["D"])

    def _probs(self, x, causal=False):
        q, k = x["q"], x["k"]
        scale = 1.0 / math.sqrt(q.shape[-1])
        with np.errstate(all="ignore"):
            scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
            if causal:
                scores = np.where(causal_mask(q.shape[-2], k.shape[-2]), scores, -np.inf)
        return softmax(scores), scores

    def oracle(self, x, causal=False, **kw):
        p, _ = self._probs(x, causal)
        with np.errstate(all="ignore"):
            return np.matmul(p, x["v"])

    def quantities(self, x, ref, causal=False, **kw):
        p, _ = self._probs(x, causal)
        scale = 1.0 / math.sqrt(x["q"].shape[-1])
        with np.errstate(all="ignore"):
            mag = np.matmul(np.abs(p), np.abs(x["v"]))
            qk = np.matmul(np.abs(x["q"]), np.swapaxes(np.abs(x["k"]), -1, -2)) * scale
            qk = np.max(qk, axis=-1, keepdims=True)
        # mag: sum_j p_ij |v_j|, what errors in p and in p@v scale with;
        # qk: the largest |q||k| scaled score magnitude of each query row,
        # what rounding in q.k (length D) scales with before it reaches p.
        return {"mag": mag, "qk": qk}

    def num_rows(self, s):
        return s["B"]


OPS = [
    Attention(
        name="attention", inputs=("q", "k", "v"), symbols=("B", "H", "S", "T", "D"),
        reduction=("T",), kwargs={"causal": False},
        basic_shape={"B": 2, "H": 4, "S": 64, "T": 64, "D": 32},
        shape_class=({"B": 1, "H": 1, "S": 1, "T": 1, "D": 1}, {"B": 1, "H": 3, "S": 7, "T": 13, "D": 5},
                     {"B": 2, "H": 2, "S": 33, "T": 127, "D": 16}, {"B": 2, "H": 4, "S": 64, "T": 64, "D": 32},
                     {"B": 1, "H": 1, "S": 5, "T": 300, "D": 64}, {"B": 3, "H": 2, "S": 17, "T": 17, "D": 24}),
        quantity_names=("mag", "qk"), row_inputs=("q", "k", "v"),
        summary="attention(q, k, v, causal=False): q (B,H,S,D), k, v (B,H,T,D); scale 1/sqrt(D); "
                "causal mask aligned bottom-right"),
]
