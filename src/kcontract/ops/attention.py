"""Scaled dot-product attention."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..formats import get_format, round_to
from ._math import softmax
from .base import FingerprintProbe, Lacks, Op, Reorder, signs


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
    #: C-PRC-03: what the ``intermediates`` probe makes subnormal (the detector's word)
    subnormal_intermediates = "probabilities"

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
            vsum = np.matmul((p > 0).astype(np.float64), np.abs(x["v"]))
        # mag: sum_j p_ij |v_j|, what errors in p and in p@v scale with;
        # qk: the largest |q||k| scaled score magnitude of each query row,
        # what rounding in q.k (length D) scales with before it reaches p;
        # vsum: sum_j |v_j| over the keys a query attends to, what an absolute error in
        # each probability (a rounding below the normal range) is multiplied by.
        return {"mag": mag, "qk": qk, "vsum": vsum}

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

    def subnormal_inputs(self, shape, fmt, kind, rng):
        """``inputs``: subnormal q against keys near 2.5 / tiny (near the largest finite
        number), so that the scores are O(1) and the result is a normal, non-uniform average of v; reading q as
        zero makes every score 0 (the plain mean of v).  D = 16 keeps the scale 1/sqrt(D)
        and its square root powers of two, and q a multiple of 4 subnormal quanta: scaling q
        first is exact.  ``outputs``: normal v just above the smallest normal, so p_ij v_j
        and the weighted sums are subnormal.  ``intermediates``: probabilities below the
        smallest normal (scores 88 to 97 below the row maximum in float32) carry the whole
        result: the maximum's key has v = 0, the others v near max / 4, all of a column's
        sign, so sum_j p_ij v_j is normal and made only of subnormal probabilities."""
        fmt = get_format(fmt)
        s = self.input_shapes(shape)
        B, H, S, T, D = (shape[k] for k in ("B", "H", "S", "T", "D"))
        q_mant = 2 ** (fmt.precision - 1)  # subnormal quanta below tiny
        if kind == "inputs":
            if D != 16:
                return None
            quanta = rng.integers(q_mant // 8, q_mant // 4, s["q"]) * 4
            q = quanta * fmt.smallest_subnormal * signs(rng, s["q"])
            # |q| ~ 0.75 tiny: keys ~ 2.5 / tiny give scores q.k / 4 of about N(0, 1.5^2)
            kmax = min(2.5 / fmt.tiny, float(fmt.max) / 1.5)
            k = kmax * rng.uniform(0.5, 1.0, s["k"]) * signs(rng, s["k"])
            v = rng.standard_normal(s["v"])
        elif kind == "outputs":
            q = rng.standard_normal(s["q"])
            k = rng.standard_normal(s["k"])
            v = fmt.tiny * rng.uniform(1.0, 2.0, s["v"]) * signs(rng, s["v"])
        elif kind == "intermediates":
            lo, hi = -np.log(fmt.tiny), -np.log(fmt.smallest_subnormal)
            scores = lo + rng.uniform(0.05, 0.6, (B, H, 1, T)) * (hi - lo)
            scores[..., 0] = 0.0  # the row maximum
            q = np.zeros(s["q"])
            q[..., 0] = np.sqrt(D)
            k = np.zeros(s["k"])
            k[..., 0] = -scores[:, :, 0, :]
            v = fmt.max / 4 * rng.uniform(0.5, 1.0, s["v"]) * signs(rng, (B, H, 1, D))
            v[:, :, 0, :] = 0.0
        else:
            return None
        return {"q": self._store(q, fmt.dtype), "k": self._store(k, fmt.dtype),
                "v": self._store(v, fmt.dtype)}

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
        quantity_names=("mag", "qk", "vsum"), row_inputs=("q", "k", "v"),
        normalised_rows=True,
        fingerprint=FingerprintProbe("attention_pv", covers_operands=False, recipe="attention"),
        summary="attention(q, k, v, causal=False): q (B,H,S,D), k, v (B,H,T,D); scale 1/sqrt(D); "
                "causal mask aligned bottom-right"),
]
