"""Scaled dot-product attention."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..formats import get_format, round_to
from ._math import softmax
from .base import FingerprintProbe, Lacks, Op, Reorder


def causal_mask(S: int, T: int) -> np.ndarray:
    """True where query i may attend key j: the mask aligned to the bottom-right
    corner (j <= i + T - S), as in FlashAttention and torch's ``causal_lower_right``."""
    i = np.arange(S)[:, None]
    j = np.arange(T)[None, :]
    return j <= i + (T - S)


def scores(q: np.ndarray, k: np.ndarray, causal: bool = False) -> np.ndarray:
    """q k^T / sqrt(D), with the causal mask applied as -inf."""
    with np.errstate(all="ignore"):
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        if causal:
            s = np.where(causal_mask(q.shape[-2], k.shape[-2]), s, -np.inf)
    return s


def attend(q, k, v, causal: bool = False, *, operands: Optional[str] = None,
           round_scores: Optional[str] = None, round_probs: Optional[str] = None):
    """The one attention formula, float64: softmax(q k^T / sqrt(D)) v, optionally with the
    operands, the scores or the probabilities rounded to a narrower format (the
    emulations of the precision and fusion detectors)."""
    with np.errstate(all="ignore"):
        if operands:
            q, k, v = (round_to(a, operands) for a in (q, k, v))
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        if round_scores:
            s = round_to(s, round_scores)
        if causal:
            s = np.where(causal_mask(q.shape[-2], k.shape[-2]), s, -np.inf)
        p = softmax(s)
        if round_probs:
            p = round_to(p, round_probs)
        return np.matmul(p, v)


class Attention(Op):
    def input_shapes(self, s):
        return {"q": (s["B"], s["H"], s["S"], s["D"]), "k": (s["B"], s["H"], s["T"], s["D"]),
                "v": (s["B"], s["H"], s["T"], s["D"])}

    def output_shape(self, s):
        return (s["B"], s["H"], s["S"], s["D"])

    def oracle(self, x, causal=False, **kw):
        return attend(x["q"], x["k"], x["v"], causal)

    def quantities(self, x, ref, causal=False, **kw):
        p = softmax(scores(x["q"], x["k"], causal))
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

    def reorder(self, kwargs):
        if kwargs.get("causal"):
            return Lacks("reorder", "permuting the keys of causal attention changes the "
                                    "result: reorder applies to causal=False only")
        return Reorder({"k": -2, "v": -2}, None)

    def emulations(self, x, fmt, causal=False, **kw):
        q, k, v = x["q"], x["k"], x["v"]
        return [("operands", attend(q, k, v, causal, operands=fmt)),
                ("operands and probabilities",
                 attend(q, k, v, causal, operands=fmt, round_probs=fmt))]

    def fusion_emulations(self, x, dtype, approximation="none", causal=False, **kw):
        out = []
        q, k, v = x["q"], x["k"], x["v"]
        for f in ("tfloat32", "bfloat16", "float16"):
            if get_format(f).precision >= dtype.precision:
                continue
            out.append((f"q, k, v rounded to {f}", attend(q, k, v, causal, operands=f)))
            out.append((f"probabilities rounded to {f} before the product with v",
                        attend(q, k, v, causal, round_probs=f)))
            out.append((f"scores rounded to {f} before the softmax",
                        attend(q, k, v, causal, round_scores=f)))
        return out

    def unstable_formulation(self, failing, nonfinite, exponent):
        stress = [f for f in failing if f in ("offset", "large", "logits")]
        if nonfinite:
            return (f"exp without max subtraction in softmax inside attention: exp overflowed "
                    f"({nonfinite} outputs NaN/Inf where the oracle is finite)")
        if stress:
            return ("exp without (exact) max subtraction in softmax inside attention: large "
                    "exp arguments lose precision")
        return None


OPS = [
    Attention(
        name="attention", inputs=("q", "k", "v"), symbols=("B", "H", "S", "T", "D"),
        reduction=("T",), kwargs={"causal": False},
        basic_shape={"B": 2, "H": 4, "S": 64, "T": 64, "D": 32},
        shape_class=({"B": 1, "H": 1, "S": 1, "T": 1, "D": 1}, {"B": 1, "H": 3, "S": 7, "T": 13, "D": 5},
                     {"B": 2, "H": 2, "S": 33, "T": 127, "D": 16}, {"B": 2, "H": 4, "S": 64, "T": 64, "D": 32},
                     {"B": 1, "H": 1, "S": 5, "T": 300, "D": 64}, {"B": 3, "H": 2, "S": 17, "T": 17, "D": 24}),
        quantity_names=("mag", "qk"), row_inputs=("q", "k", "v"),
        normalised_rows=True,
        fingerprint=FingerprintProbe("attention_pv", covers_operands=False, recipe="attention"),
        summary="attention(q, k, v, causal=False): q (B,H,S,D), k, v (B,H,T,D); scale 1/sqrt(D); "
                "causal mask aligned bottom-right"),
]
