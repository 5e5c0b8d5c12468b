"""Reductions over the last axis: sum, softmax, layernorm."""
from __future__ import annotations

import numpy as np

from ._math import softmax
from .base import FingerprintProbe, RowsOp, signs
from .families import get_family
from ..formats import get_format

# 33 x 33 is square: reducing over the wrong axis there keeps the output's shape
_ROWS = ({"R": 1, "N": 1}, {"R": 7, "N": 13}, {"R": 3, "N": 127}, {"R": 16, "N": 256},
         {"R": 5, "N": 1000}, {"R": 2, "N": 4099}, {"R": 31, "N": 64}, {"R": 33, "N": 33})


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

    def overflow_inputs(self, shape, dtype, rng):
        fmax = float(self.output_format(dtype).max)
        R, N = shape["R"], shape["N"]
        s = np.where(np.arange(R) % 2 == 0, 1.0, -1.0)
        r = 2.0 ** np.linspace(-2.0, 2.0, R)
        x = (s * r)[:, None] * (fmax / N) * rng.uniform(0.5, 1.5, (R, N))
        return {"x": self._store(x, self.input_format("x", dtype))}

    def subnormal_inputs(self, shape, fmt, kind, rng):
        fmt = get_format(fmt)
        tiny = fmt.tiny
        s = self.input_shapes(shape)["x"]
        if kind == "inputs":
            row_sign = signs(rng, (s[0], 1))
            x = rng.uniform(0.125, 1.0, s) * tiny * row_sign
        else:
            # pairs t, -(t - d) of normal numbers whose sum d is subnormal
            n = s[1] - s[1] % 2
            if n < 2:
                return None
            q = fmt.smallest_subnormal
            t = np.round(rng.uniform(1.5, 2.0, (s[0], n // 2)) * tiny / q) * q
            dmax = max(1, int(tiny / q / n))
            d = rng.integers(1, dmax + 1, (s[0], n // 2)) * q
            sign = signs(rng, (s[0], n // 2))
            pairs = np.stack([t * sign, -(t - d) * sign], axis=-1).reshape(s[0], n)
            x = np.zeros(s)
            for r in range(s[0]):
                x[r, :n] = pairs[r, rng.permutation(n)]
        return {"x": self._store(x, fmt.dtype)}


class Softmax(Rowwise):
    def oracle(self, x, **kw):
        return softmax(x["x"])

    def quantities(self, x, ref, **kw):
        with np.errstate(all="ignore"):
            spread = np.max(x["x"], axis=-1, keepdims=True) - x["x"]
        # mag: the output itself (softmax errors are relative); spread: how far below
        # the row max each logit is (exp's argument, whose rounding scales with it).
        return {"mag": np.abs(ref), "spread": np.abs(spread)}

    def policy_reference(self, x, policy, **kw):
        if policy != "mask":
            return super().policy_reference(x, policy, **kw)
        # an absent logit has probability 0; the row renormalises over the finite ones
        xs = x["x"]
        present = np.isfinite(xs)
        with np.errstate(all="ignore"):
            p = softmax(np.where(present, xs, -np.inf))
            p = np.where(np.any(present, axis=-1, keepdims=True), p, 0.0)
            m = np.max(np.where(present, xs, -np.inf), axis=-1, keepdims=True)
            spread = np.where(present, m - xs, 0.0)
        extra = {"mag": np.abs(p), "spread": np.abs(spread), "alt": np.zeros_like(p),
                 "has_alt": np.zeros_like(p)}
        return p, {"x": np.where(present, xs, 0.0)}, extra

    def subnormal_inputs(self, shape, fmt, kind, rng):
        if kind == "inputs":
            return None  # exp of a subnormal logit is 1 either way: flushing it is invisible
        fmt = get_format(fmt)
        s = self.input_shapes(shape)["x"]
        # logits this far below the row maximum give probabilities in the subnormal range
        lo, hi = -np.log(fmt.tiny), -np.log(fmt.smallest_subnormal)
        x = -(lo + rng.uniform(0.1, 0.8, s) * (hi - lo))
        x[..., 0] = 0.0  # the row maximum: its probability is about 1
        return {"x": self._store(x, fmt.dtype)}

    def overflow_inputs(self, shape, dtype, rng):
        return self.generate(shape, dtype, "logits", rng)

    def unstable_formulation(self, failing, nonfinite, exponent):
        stress = [f for f in failing if f in ("offset", "large", "logits")]
        if nonfinite:
            return (f"exp without max subtraction in softmax: exp overflowed "
                    f"({nonfinite} outputs NaN/Inf where the oracle is finite)")
        if stress:
            return "exp without (exact) max subtraction in softmax: large exp arguments lose precision"
        return None


def masked_layernorm(x, w, b, eps):
    """layernorm over each row's finite elements; 0 at absent positions (nan=mask)."""
    present = np.isfinite(x)
    cnt = np.sum(present, axis=-1, keepdims=True)
    xz = np.where(present, x, 0.0)
    with np.errstate(all="ignore"):
        mu = np.sum(xz, axis=-1, keepdims=True) / np.maximum(cnt, 1)
        dev = np.where(present, x - mu, 0.0)
        var = np.sum(dev * dev, axis=-1, keepdims=True) / np.maximum(cnt, 1)
        sd = np.sqrt(var + eps)
        ref = np.where(present, dev / sd * w + b, 0.0)
        kappa = np.sum(np.abs(xz), axis=-1, keepdims=True) / np.maximum(cnt, 1) / sd
        xhat = np.abs(dev) / sd
    q = {"mag": np.where(present, np.abs(w) * (1.0 + xhat), 0.0), "kappa": kappa, "xhat": xhat,
         "rstd": 1.0 / sd}
    return ref, q


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
        # rstd: 1 / sqrt(var + eps), what an absolute error in the mean is multiplied by.
        return {"mag": np.abs(x["weight"]) * (1.0 + xhat), "kappa": kappa, "xhat": xhat,
                "rstd": 1.0 / sd}

    def select_rows(self, x, rows):
        return {"x": x["x"][rows], "weight": x["weight"], "bias": x["bias"]}

    def policy_reference(self, x, policy, eps=1e-5, **kw):
        if policy != "mask":
            return super().policy_reference(x, policy, eps=eps, **kw)
        fin = {k: (np.where(np.isfinite(v), v, 0.0) if v.dtype.kind == "f" else v)
               for k, v in x.items()}
        ref, q = masked_layernorm(x["x"], x["weight"], x["bias"], eps)
        q.update(alt=np.zeros_like(ref), has_alt=np.zeros_like(ref))
        return ref, fin, q

    def overflow_inputs(self, shape, dtype, rng):
        return self.generate(shape, dtype, "large", rng)

    def subnormal_inputs(self, shape, fmt, kind, rng):
        """``inputs``: rows of subnormals (deviations from the mean at the subnormal scale),
        bias 0: the variance is far below eps, so the results are (x - mean) / sqrt(eps) * w,
        about 316 |x|, normal numbers; reading x as zero gives 0.  ``outputs``: N(0, 1) rows
        and weights just above the smallest normal, bias 0: (x - mean) / std * w is
        subnormal wherever |x - mean| < std tiny / |w|."""
        fmt = get_format(fmt)
        R, N = shape["R"], shape["N"]
        if kind == "inputs":
            # magnitudes in [tiny / 64, tiny): 316 |x - mean| is normal for most of them
            x = fmt.tiny * 2.0 ** rng.uniform(-6.0, 0.0, (R, N)) * signs(rng, (R, N))
            x = np.minimum(np.abs(x), np.nextafter(fmt.tiny, 0)) * np.sign(x)
            w = 1.0 + 0.25 * rng.standard_normal(N)
        else:
            x = rng.standard_normal((R, N))
            w = fmt.tiny * rng.uniform(1.0, 1.5, N) * signs(rng, N)
        return {"x": self._store(x, fmt.dtype), "weight": self._store(w, fmt.dtype),
                "bias": self._store(np.zeros(N), fmt.dtype)}

    def conditioning_sweep(self, shape, fmt, rng):
        """The same N(0, 1) rows plus a common offset 0, 1, 2, 4, ... (kappa = mean|x| / std
        grows like the offset), up to 2^14 or where x² would near the format's range."""
        fmt = get_format(fmt)
        base = self.generate(shape, fmt, "normal", rng)
        z = rng.standard_normal((shape["R"], shape["N"]))
        top = min(2.0 ** 14, float(np.sqrt(float(fmt.max))) / 16)
        offsets = [0.0] + [2.0 ** j for j in range(0, 15) if 2.0 ** j <= top]
        return [(c, {"x": self._store(z + c, fmt.dtype), "weight": base["weight"],
                     "bias": base["bias"]}) for c in offsets]

    def unstable_formulation(self, failing, nonfinite, exponent):
        if "offset" in failing:
            kind = None if exponent is None else self.conditioning_growth_kind(exponent)
            grows = "" if exponent is None else f"the error grows like kappa^{exponent:.1f} " \
                                                f"across offsets"
            if kind == "linear":
                return (f"not a cancellation in the variance: {grows}, as a stable (two-pass "
                        f"or Welford) formulation's does (E[x²]−E[x]² would grow like "
                        f"kappa²), with a larger constant than the declared accumulator "
                        f"allows: a narrower working precision, not the formulation")
            if nonfinite:
                return ("variance as E[x²]−E[x]²: cancellation made the variance negative "
                        f"({nonfinite} outputs NaN/Inf; a sum of squares is never negative)"
                        + (f"; {grows}" if grows else ""))
            if kind == "quadratic":
                return (f"variance as E[x²]−E[x]² (one pass): {grows}, as its cancellation "
                        f"predicts (kappa²; a two-pass or Welford variance grows like kappa)")
            if kind == "other":
                return (f"inconclusive: {grows}, neither the kappa² of E[x²]−E[x]² nor the "
                        f"kappa of a stable formulation")
            return None
        if "large" in failing:
            return "squares overflow: x² summed without rescaling"
        return None


OPS = [
    Sum(name="sum", inputs=("x",), symbols=("R", "N"), reduction=("N",),
        basic_shape={"R": 16, "N": 1024}, shape_class=_ROWS, row_inputs=("x",),
        reorder_axes={"x": -1}, fingerprint=FingerprintProbe("row_sum", recipe="sum"),
        summary="sum(x): over the last axis, (R, N) -> (R,)"),
    Softmax(name="softmax", inputs=("x",), symbols=("R", "N"), reduction=("N",),
            basic_shape={"R": 16, "N": 512}, shape_class=_ROWS, quantity_names=("mag", "spread"),
            row_inputs=("x",), reorder_axes={"x": -1}, reorder_output_axis=-1,
            normalised_rows=True, summary="softmax(x): over the last axis"),
    LayerNorm(name="layernorm", inputs=("x", "weight", "bias"), symbols=("R", "N"),
              reduction=("N",), kwargs={"eps": 1e-5}, basic_shape={"R": 16, "N": 512},
              shape_class=_ROWS, quantity_names=("mag", "kappa", "xhat", "rstd"),
              row_inputs=("x",),
              reorder_axes={"x": -1, "weight": -1, "bias": -1}, reorder_output_axis=-1,
              conditioning_quantity="kappa",
              summary="layernorm(x, weight, bias, eps=1e-5): over the last axis"),
]
