"""The precision fingerprint: which recipe a kernel really ran.

A *recipe* is the pair (operand format, accumulator format): the format the
operands are rounded to before they are multiplied, and the format partial sums
are kept in.  Six recipes occur in practice (and every one of them passes a
naive ``allclose(1e-2)`` test on ``rand`` inputs):

====================  =====================================================
fp32 / fp32           what an fp32 kernel promises
tf32 / fp32           ``allow_tf32``: operands rounded to 11 significant bits
bf16 / fp32           autocast-style operand downcast to bfloat16
fp16 / fp32           ``allow_fp32_to_fp16``: operands cast to fp16
fp32 / fp16           fp16 accumulators (HMMA with fp16 C, fp16 workspaces)
fp32 / bf16           bf16 accumulators / workspaces
====================  =====================================================

The fingerprint identifies the recipe from crafted inputs whose outputs do not
depend on the summation order:

* **single-product probes** (a diagonal ``a`` times a diagonal ``b``: each
  output element is one product plus exact zeros).  The output is
  ``round_acc(round_op(a) * round_op(b))`` for every order, so it can be
  predicted for every candidate recipe and matched bit for bit.  Ranges are
  chosen so that the candidates disagree: 24-bit significands with a power-of-two
  partner (how many bits survive), ``a`` beyond fp16's range with a small partner
  (fp16 *operands* overflow, an fp16 *accumulator* does not), products beyond
  65504 (an fp16 accumulator overflows, fp16 operands do not), ``a`` below fp16's
  normal range, products below it, and products of two 11-bit or two 8-bit
  significands (exact in an fp32 accumulator, rounded in a narrow one).
* **an integer sum** of ``4096 + 2047 * 1`` (every operand exact in every
  format, every partial sum an integer below 2**24): exact for any order in a
  24-bit accumulator, impossible in an 11- or 8-bit one (6143 needs 13 bits).
* **error growth** on random-sign inputs (already rounded to the identified
  operand format) at K = 64 .. 4096: the error of a p-bit accumulator is
  ``u * sqrt(sum of squared partial sums / 3)``; the partial sums are those of
  sequential or of pairwise summation, whichever model the observed growth
  follows, and the estimate ``bits = -log2(u)`` is reported.

Everything here is plain numpy on callables ``call(a, b) -> out`` (or
``call(x) -> out`` for sums), so it is testable without the checker.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from ..formats import Format, get_format, round_to, ulp

OPERAND_FORMATS = ("float32", "tfloat32", "float16", "bfloat16")
ACC_FORMATS = ("float32", "float16", "bfloat16")
SHORT = {"float64": "fp64", "float32": "fp32", "tfloat32": "tf32", "float16": "fp16",
         "bfloat16": "bf16"}

_PROBE_SEED = 0x5EED_F1


def short(fmt) -> str:
    name = get_format(fmt).name
    return SHORT.get(name, name)


def recipe_text(operand: str, accumulator: str) -> str:
    """E.g. ``"operands rounded to fp16, fp32 accumulation"`` or
    ``"fp32 operands, bf16 accumulation"``."""
    op = get_format(operand).name
    left = "fp32 operands" if op == "float32" else f"operands rounded to {short(op)}"
    return f"{left}, {short(accumulator)} accumulation"


# -- emulation ------------------------------------------------------------------------

def rounded(x, fmt) -> np.ndarray:
    """``x`` rounded (RNE) into ``fmt``, as float64; overflow gives inf."""
    with np.errstate(over="ignore", invalid="ignore"):
        return round_to(np.asarray(x, dtype=np.float64), fmt)


def predict_single(a, b, operand: str, accumulator: str, out: str = "float32") -> np.ndarray:
    """Output of ``0 + a*b`` (plus exact zeros) under a recipe: every order agrees."""
    with np.errstate(over="ignore", invalid="ignore"):
        p = rounded(a, operand) * rounded(b, operand)  # exact in float64 (<= 2 x 24 bits)
        return rounded(rounded(p, accumulator), out)


# -- bit estimates from error growth ----------------------------------------------------

def _pairwise_sq(terms: np.ndarray) -> np.ndarray:
    """Sum over the internal nodes of a pairwise tree of (node value)**2, per row."""
    t = terms
    total = np.zeros(t.shape[0])
    while t.shape[1] > 1:
        if t.shape[1] % 2:
            t = np.concatenate([t, np.zeros((t.shape[0], 1))], axis=1)
        t = t[:, 0::2] + t[:, 1::2]
        total += np.sum(t * t, axis=1)
    return total


def error_models(terms: np.ndarray) -> dict[str, np.ndarray]:
    """Per row, sqrt(sum of squared partial sums / 3): the error standard deviation,
    divided by u, of a p-bit accumulator under the two summation orders."""
    terms = np.asarray(terms, dtype=np.float64)
    s = np.cumsum(terms, axis=1)
    return {"sequential": np.sqrt(np.sum(s[:, 1:] ** 2, axis=1) / 3.0),
            "pairwise": np.sqrt(_pairwise_sq(terms) / 3.0)}


@dataclass
class BitsEstimate:
    bits: float  # estimated significand bits of the accumulator (nan: not measurable)
    model: str  # "sequential" | "pairwise"
    per_n: dict = field(default_factory=dict)  # n -> estimated u
    lower_bound: bool = False  # the error is at the level of the output rounding

    def as_dict(self) -> dict:
        return {"accumulator_bits": None if not math.isfinite(self.bits) else round(self.bits, 1),
                "order_model": self.model, "bits_lower_bound": self.lower_bound,
                "u_by_length": {int(k): float(v) for k, v in self.per_n.items()}}


def estimate_bits(samples: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]],
                  out_format: str = "float32") -> BitsEstimate:
    """``samples``: (n, terms (rows, n), kernel output (rows,), exact sum (rows,)).

    For each model the ratio rms(error) / rms(model) estimates u at each n; the
    model whose estimates agree best across n (the observed growth) is chosen.
    The expected output-rounding noise is removed in quadrature first."""
    ratios: dict[str, dict[int, float]] = {"sequential": {}, "pairwise": {}}
    floor_hit = True
    for n, terms, out, exact in samples:
        out = np.asarray(out, dtype=np.float64)
        ok = np.isfinite(out)
        if not ok.any():
            continue
        err2 = np.mean((out[ok] - exact[ok]) ** 2)
        noise2 = np.mean(ulp(exact[ok], out_format) ** 2) / 12.0 if out_format != "float32" else 0.0
        excess2 = err2 - noise2
        if excess2 > noise2:
            floor_hit = False
        excess = math.sqrt(max(excess2, noise2 * 0.25 if noise2 else 0.0, 0.0))
        models = error_models(terms[ok])
        for name, m in models.items():
            rm = math.sqrt(np.mean(m * m))
            if rm > 0:
                ratios[name][n] = excess / rm
    best, best_spread = "sequential", math.inf
    for name, r in ratios.items():
        if len(r) < 1:
            continue
        logs = np.log2([v for v in r.values() if v > 0] or [1e-300])
        spread = float(np.std(logs)) if len(logs) > 1 else 0.0
        if spread < best_spread:
            best, best_spread = name, spread
    r = ratios[best]
    if not r:
        return BitsEstimate(float("nan"), best)
    u_est = float(np.median(list(r.values())))
    bits = -math.log2(u_est) if u_est > 0 else float("inf")  # inf: exact on these inputs
    return BitsEstimate(bits, best, r, lower_bound=floor_hit and out_format != "float32")


def nearest_accumulator(bits: float) -> Optional[str]:
    """The accumulator format an estimated bit count is consistent with."""
    if not math.isfinite(bits):
        return "float32" if bits > 0 else None
    if bits >= 17.5:
        return "float32"
    if bits >= 9.5:
        return "float16"
    return "bfloat16"


# -- probes -----------------------------------------------------------------------------

def _sig(rng, n, bits):
    """n random significands in [1, 2) with ``bits`` significant bits, random signs."""
    frac = rng.integers(0, 2 ** (bits - 1), n) / 2.0 ** (bits - 1)
    return (1.0 + frac) * np.where(rng.random(n) < 0.5, -1.0, 1.0)


def _sig_pos(rng, n, bits, hi=2.0):
    frac = rng.integers(0, 2 ** (bits - 1), n) / 2.0 ** (bits - 1)
    return np.minimum(1.0 + frac * (hi - 1.0), hi)


def single_product_probe(count: int = 8, seed: int = _PROBE_SEED, positive: bool = False):
    """Values (a, b, range names) of the single-product probes, float64 (fp32-exact).

    ``positive``: only products >= 8 (where gelu(v) == v in every float format), for
    probing the product inside linear_gelu; the underflow ranges are left out."""
    rng = np.random.default_rng(seed)
    a, b, names = [], [], []

    def sign(n):
        return np.ones(n) if positive else np.where(rng.random(n) < 0.5, -1.0, 1.0)

    def add(name, av, bv):
        a.extend(av)
        b.extend(bv)
        names.extend([name] * len(av))

    one = np.ones(count)
    lift = 8.0 if positive else 1.0
    add("bits", _sig_pos(rng, count, 24) * sign(count) * lift, sign(count))
    add("operand-overflow", _sig_pos(rng, count, 24) * sign(count) * 2.0 ** 20,
        one * 2.0 ** -20 * lift)
    add("product-overflow", _sig_pos(rng, count, 24, 1.9) * 2.0 ** 14 * sign(count),
        one * 2.0 ** 4)
    if not positive:
        add("operand-underflow", _sig(rng, count, 24) * 2.0 ** -20, one * 2.0 ** 14)
        add("product-underflow", _sig(rng, count, 24) * 2.0 ** -12, one * 2.0 ** -12)
    add("product-22bit", _sig_pos(rng, count, 11) * sign(count) * lift,
        _sig_pos(rng, count, 11) * sign(count))
    add("product-16bit", _sig_pos(rng, count, 8) * sign(count) * lift,
        _sig_pos(rng, count, 8) * sign(count))
    add("product-27bit", _sig_pos(rng, 2 * count, 24) * sign(2 * count) * lift,
        (1.0 + rng.integers(1, 4, 2 * count) / 4.0) * sign(2 * count))
    return np.array(a), np.array(b), np.array(names)


def _same(x, y) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    # zeros match whatever their sign: where a single product underflows to -0, the
    # exact +0 terms added after it make the sum +0 in some orders and not in others
    with np.errstate(invalid="ignore"):
        return (x == y) | (np.isnan(x) & np.isnan(y))


def candidate_recipes(dtype: str):
    dtype = get_format(dtype).name
    if dtype == "float32":
        ops = OPERAND_FORMATS
    elif dtype == "float16":
        ops = ("float16", "bfloat16")
    elif dtype == "bfloat16":
        ops = ("bfloat16", "float16")
    else:
        ops = (dtype,)
    return [(o, c) for o in ops for c in ACC_FORMATS]


def _choose(matches: dict, int_exact, dtype: str, acc_of=lambda r: r[1]):
    """The best-matching recipes (ties broken toward the widest formats), after
    ruling out accumulators the integer-sum probe contradicts: an exact 13-bit sum
    excludes 11- and 8-bit accumulators."""
    cands = dict(matches)
    if int_exact is True:
        wide = {r: s for r, s in cands.items() if get_format(acc_of(r)).precision >= 13}
        cands = wide or cands
    if not cands:
        return 0.0, []
    best = max(cands.values())
    tied = [r for r, s in cands.items() if s == best]
    return best, tied


def _preference(recipe, dtype):
    """Sort key: the widest (simplest) explanation first."""
    o, c = recipe
    order_o = {dtype: 0, "float32": 1, "tfloat32": 2, "float16": 3, "bfloat16": 4}
    order_c = {"float32": 0, "float16": 1, "bfloat16": 2}
    return (order_o.get(o, 9), order_c.get(c, 9))


@dataclass
class Fingerprint:
    operand_format: Optional[str]
    accumulator_format: Optional[str]
    accumulator_bits: Optional[float]
    recipe: str
    confidence: float  # share of single-product probes the recipe matches exactly
    matches: dict = field(default_factory=dict)  # "op/acc" -> share matched
    equivalent: list = field(default_factory=list)  # recipes that match equally well
    integer_sum_exact: Optional[bool] = None
    integer_sum: list = field(default_factory=list)
    bits: Optional[BitsEstimate] = None
    notes: list = field(default_factory=list)
    calls: int = 0

    def as_dict(self) -> dict:
        d = {"recipe": self.recipe, "operand_format": self.operand_format,
             "accumulator_format": self.accumulator_format,
             "accumulator_bits": self.accumulator_bits,
             "recipe_confidence": round(self.confidence, 3),
             "recipe_matches": {k: round(v, 3) for k, v in self.matches.items()},
             "equivalent_recipes": list(self.equivalent)}
        if self.integer_sum_exact is not None:
            d["integer_sum_exact"] = self.integer_sum_exact
            d["integer_sum"] = self.integer_sum
        if self.bits is not None:
            d.update({k: v for k, v in self.bits.as_dict().items() if k != "accumulator_bits"})
        if self.notes:
            d["fingerprint_notes"] = list(self.notes)
        return d


Call = Callable[..., Optional[np.ndarray]]


def _store(x, dtype: Format) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, dtype=np.float64).astype(dtype.dtype)


def fingerprint_matmul(call: Call, dtype="float32", *, growth=(64, 256, 1024, 4096),
                       rows: int = 8, seed: int = _PROBE_SEED,
                       positive: bool = False) -> Fingerprint:
    """Identify the recipe of a matmul kernel; ``call(a, b)`` returns its output
    (an array, or None if the kernel failed).  ``positive``: probes whose exact
    results are all >= 8 (for a product followed by gelu, which is the identity
    there); pass ``growth=()`` when the error growth cannot be observed."""
    fmt = get_format(dtype)
    calls = 0
    notes = []
    # 1. single-product probes on a diagonal
    av, bv, names = single_product_probe(seed=seed, positive=positive)
    av = rounded(av, fmt)  # the probe as the kernel's storage holds it
    bv = rounded(bv, fmt)
    keep = np.isfinite(av) & np.isfinite(bv) & (av != 0) & (bv != 0)  # storable probes only
    av, bv, names = av[keep], bv[keep], names[keep]
    n = av.size
    A = np.diag(av)
    B = np.diag(bv)
    out = call(_store(A, fmt), _store(B, fmt))
    calls += 1
    diag = None if out is None else np.diagonal(np.asarray(out, dtype=np.float64)).copy()
    matches: dict[tuple, float] = {}
    if diag is not None:
        for rec in candidate_recipes(fmt.name):
            pred = predict_single(av, bv, rec[0], rec[1], fmt.name)
            matches[rec] = float(np.mean(_same(diag, pred)))
    # 2. integer sum 4096 + 2047 ones (fp32 only: needs a 24-bit output)
    int_exact, int_vals = None, []
    if fmt.name == "float32":
        K = 2048
        pos = [0, K - 1, K // 2, int(np.random.default_rng(seed).integers(1, K - 1))]
        a = np.ones((len(pos), K))
        b = np.ones((K, len(pos)))
        for i, p in enumerate(pos):
            a[i, p] = 64.0
            b[p, i] = 64.0
        out = call(_store(a, fmt), _store(b, fmt))
        calls += 1
        if out is not None:
            d = np.diagonal(np.asarray(out, dtype=np.float64))
            int_vals = [float(v) for v in d]
            int_exact = bool(np.all(d == 4096.0 + K - 1))
    # choose the recipe
    if matches:
        best_share, tied = _choose(matches, int_exact, fmt.name)
        tied = sorted(tied, key=lambda r: _preference(r, fmt.name))
        rec = tied[0]
        if int_exact is False and rec[1] == "float32":
            # multi-term sums round although single products do not: a narrow
            # accumulator behind a wide first stage; decided by the bit estimate below
            notes.append("single products are exact but a 13-bit integer sum is not: "
                         "partial sums are narrowed somewhere")
    else:
        best_share, tied, rec = 0.0, [], (None, None)
    # 3. error growth on random-sign inputs rounded to the operand format
    rng = np.random.default_rng(seed + 1)
    samples = []
    op_fmt = rec[0] or fmt.name
    for K in growth:
        a = rounded(rounded(rng.standard_normal((rows, K)), op_fmt), fmt)
        b = rounded(rounded(rng.standard_normal((K, rows)), op_fmt), fmt)
        out = call(_store(a, fmt), _store(b, fmt))
        calls += 1
        if out is None:
            continue
        terms = (a[:, None, :] * b.T[None, :, :]).reshape(rows * rows, K)
        exact = (a @ b).reshape(-1)
        samples.append((K, terms, np.asarray(out, dtype=np.float64).reshape(-1), exact))
    est = estimate_bits(samples, fmt.name) if samples else None
    bits = None if est is None or not math.isfinite(est.bits) else round(est.bits, 1)
    acc = rec[1]
    if fmt.name != "float32" and est is not None:
        # single products cannot show the accumulator through a 16-bit output
        acc = "float32" if est.lower_bound else nearest_accumulator(est.bits)
        if est.lower_bound:
            notes.append(f"accumulation error is below {short(fmt)} output rounding: "
                         "consistent with an fp32 accumulator")
    elif int_exact is False and acc == "float32" and est is not None:
        acc = nearest_accumulator(est.bits)
    confident = best_share >= 0.9
    if rec[0] is None:
        recipe = "unknown (the kernel failed on the probes)"
    elif not confident:
        recipe = (f"no candidate recipe explains the probes (closest: "
                  f"{recipe_text(rec[0], rec[1])}, {best_share:.0%} of probes)")
    else:
        recipe = recipe_text(rec[0], acc)
    return Fingerprint(
        operand_format=rec[0] if confident else None,
        accumulator_format=acc if confident else (nearest_accumulator(est.bits) if est else None),
        accumulator_bits=bits, recipe=recipe, confidence=best_share,
        matches={f"{short(o)}/{short(c)}": s for (o, c), s in matches.items()},
        equivalent=[recipe_text(*r) for r in tied[1:]] if confident else [],
        integer_sum_exact=int_exact, integer_sum=int_vals, bits=est, notes=notes, calls=calls)


def fingerprint_sum(call: Call, dtype="float32", *, growth=(64, 256, 1024, 4096),
                    rows: int = 16, seed: int = _PROBE_SEED) -> Fingerprint:
    """The accumulator of a row-sum kernel: single-term rows (one nonzero among
    zeros: ``round_acc(x)`` in any order), the 4096 + 2047 integer sum, error growth."""
    fmt = get_format(dtype)
    calls = 0
    rng = np.random.default_rng(seed)
    count = 8
    parts = [_sig(rng, count, 24),                                   # bits that survive
             _sig_pos(rng, count, 24, 1.9) * 2.0 ** 17,              # beyond fp16's range
             _sig(rng, count, 24) * 2.0 ** -20,                      # fp16 subnormal range
             _sig(rng, count, 24) * 2.0 ** -10]                      # fp16 normal, small
    vals = rounded(np.concatenate(parts), fmt)
    vals = vals[np.isfinite(vals) & (vals != 0)]  # storable probes only
    N = 64
    x = np.zeros((vals.size, N))
    pos = rng.integers(0, N, vals.size)
    x[np.arange(vals.size), pos] = vals
    out = call(_store(x, fmt))
    calls += 1
    matches = {}
    if out is not None:
        o = np.asarray(out, dtype=np.float64)
        for acc in ACC_FORMATS:
            pred = rounded(rounded(vals, acc), fmt)
            matches[acc] = float(np.mean(_same(o, pred)))
    int_exact, int_vals = None, []
    if fmt.name == "float32":
        K = 2048
        x = np.ones((4, K))
        for i, p in enumerate([0, K - 1, K // 2, 1 + int(rng.integers(0, K - 2))]):
            x[i, p] = 4096.0
        out = call(_store(x, fmt))
        calls += 1
        if out is not None:
            o = np.asarray(out, dtype=np.float64)
            int_vals = [float(v) for v in o]
            int_exact = bool(np.all(o == 4096.0 + K - 1))
    samples = []
    for K in growth:
        x = rounded(rng.standard_normal((rows, K)), fmt)
        out = call(_store(x, fmt))
        calls += 1
        if out is not None:
            samples.append((K, x, np.asarray(out, dtype=np.float64), np.sum(x, axis=1)))
    est = estimate_bits(samples, fmt.name) if samples else None
    bits = None if est is None or not math.isfinite(est.bits) else round(est.bits, 1)
    notes = []
    if matches:
        best_share, tied = _choose(matches, int_exact, fmt.name, acc_of=lambda a: a)
        tied = sorted(tied, key=lambda c: _preference((fmt.name, c), fmt.name)[1])
        acc = tied[0]
    else:
        best_share, tied, acc = 0.0, [], None
    if fmt.name != "float32" and est is not None:
        acc = "float32" if est.lower_bound else nearest_accumulator(est.bits)
    elif int_exact is False and acc == "float32" and est is not None:
        notes.append("single terms pass unrounded but a 13-bit integer sum is rounded: "
                     "partial sums are narrowed after a wide first stage")
        acc = nearest_accumulator(est.bits)
    if acc is None:
        recipe = "unknown (the kernel failed on the probes)"
    elif best_share < 0.9:
        recipe = (f"no accumulator format explains the single-term probes (closest: "
                  f"{short(acc)}, {best_share:.0%} of probes)")
        acc = nearest_accumulator(est.bits) if est is not None else None
    else:
        recipe = f"{short(acc)} accumulation"
    return Fingerprint(operand_format=fmt.name, accumulator_format=acc, accumulator_bits=bits,
                       recipe=recipe, confidence=best_share,
                       matches={short(k): v for k, v in matches.items()},
                       equivalent=[], integer_sum_exact=int_exact, integer_sum=int_vals,
                       bits=est, notes=notes, calls=calls)


def fingerprint_attention(call: Call, dtype="float32", *, growth=(64, 256, 1024),
                          seed: int = _PROBE_SEED) -> Fingerprint:
    """The recipe of attention's p @ v stage.  With q = 0 every score is 0, every
    probability exactly 1/T (T a power of two), so each output column is
    (1/T) * sum_t v[t, d]: one nonzero v per column is a single-operand probe
    (``round_acc(round_op(v) / T)`` in any order), a column 4096, 1, ..., 1 the
    integer sum, random columns the error growth.  ``call(q, k, v)``."""
    fmt = get_format(dtype)
    rng = np.random.default_rng(seed)
    calls = 0
    count = 8
    T = 64
    parts = [("bits", _sig(rng, count, 24) * 2.0 ** 6),
             ("operand-overflow", _sig_pos(rng, count, 24, 1.9) * 2.0 ** 17),
             ("product-underflow", _sig(rng, count, 24) * 2.0 ** -12),
             ("operand-underflow", _sig(rng, count, 24) * 2.0 ** -20),
             ("product-22bit", _sig(rng, count, 11) * 2.0 ** 6),
             ("product-16bit", _sig(rng, count, 8) * 2.0 ** 6)]
    vals = rounded(np.concatenate([p for _, p in parts]), fmt)
    vals = vals[np.isfinite(vals) & (vals != 0)]  # storable probes only
    D = vals.size
    v = np.zeros((1, 1, T, D))
    v[0, 0, rng.integers(0, T, D), np.arange(D)] = vals
    q = np.zeros((1, 1, 1, D))
    k = np.zeros((1, 1, T, D))
    out = call(_store(q, fmt), _store(k, fmt), _store(v, fmt))
    calls += 1
    matches: dict[tuple, float] = {}
    if out is not None:
        o = np.asarray(out, dtype=np.float64).reshape(-1)
        for rec in candidate_recipes(fmt.name):
            pred = predict_single(vals, np.full(D, 1.0 / T), rec[0], rec[1], fmt.name)
            matches[rec] = float(np.mean(_same(o, pred)))
    int_exact, int_vals = None, []
    if fmt.name == "float32":
        TT = 2048
        v = np.ones((1, 1, TT, 4))
        for d, p in enumerate([0, TT - 1, TT // 2, 1 + int(rng.integers(0, TT - 2))]):
            v[0, 0, p, d] = 4096.0
        out = call(_store(np.zeros((1, 1, 1, 4)), fmt), _store(np.zeros((1, 1, TT, 4)), fmt),
                   _store(v, fmt))
        calls += 1
        if out is not None:
            o = np.asarray(out, dtype=np.float64).reshape(-1)
            int_vals = [float(x) for x in o * TT]
            int_exact = bool(np.all(o == (4096.0 + TT - 1) / TT))
    if matches:
        best_share, tied = _choose(matches, int_exact, fmt.name)
        tied = sorted(tied, key=lambda r: _preference(r, fmt.name))
        rec = tied[0]
    else:
        best_share, tied, rec = 0.0, [], (None, None)
    samples = []
    op_fmt = rec[0] or fmt.name
    Dg = 16
    for TT in growth:
        v = rounded(rounded(rng.standard_normal((1, 1, TT, Dg)), op_fmt), fmt)
        out = call(_store(np.zeros((1, 1, 1, Dg)), fmt), _store(np.zeros((1, 1, TT, Dg)), fmt),
                   _store(v, fmt))
        calls += 1
        if out is None:
            continue
        terms = v[0, 0].T / TT
        samples.append((TT, terms, np.asarray(out, dtype=np.float64).reshape(-1),
                        np.sum(terms, axis=1)))
    est = estimate_bits(samples, fmt.name) if samples else None
    bits = None if est is None or not math.isfinite(est.bits) else round(est.bits, 1)
    acc = rec[1]
    notes = ["probes the p @ v stage (q = 0: every probability is exactly 1/T)"]
    if fmt.name != "float32" and est is not None:
        acc = "float32" if est.lower_bound else nearest_accumulator(est.bits)
    elif int_exact is False and acc == "float32" and est is not None:
        acc = nearest_accumulator(est.bits)
    confident = best_share >= 0.9
    if rec[0] is None:
        recipe = "unknown (the kernel failed on the probes)"
    elif not confident:
        recipe = (f"no candidate recipe explains the p @ v probes (closest: "
                  f"{recipe_text(rec[0], rec[1])}, {best_share:.0%} of probes)")
    else:
        recipe = recipe_text(rec[0], acc) + " in p @ v"
    return Fingerprint(
        operand_format=rec[0] if confident else None,
        accumulator_format=acc if confident else (nearest_accumulator(est.bits) if est else None),
        accumulator_bits=bits, recipe=recipe, confidence=best_share,
        matches={f"{short(o)}/{short(c)}": sh for (o, c), sh in matches.items()},
        equivalent=[recipe_text(*r) for r in tied[1:]] if confident else [],
        integer_sum_exact=int_exact, integer_sum=int_vals, bits=est, notes=notes, calls=calls)


# -- rounding modes of conversions ----------------------------------------------------------

ROUNDING_MODES = {
    "rne": "round to nearest, ties to even",
    "rna": "round to nearest, ties away from zero",
    "rtz": "round toward zero (truncation)",
    "rup": "round toward +infinity",
    "rdn": "round toward -infinity",
}


def round_mode(x, fmt, mode: str) -> np.ndarray:
    """``x`` (float64 values) rounded into ``fmt`` with an IEEE rounding mode
    (subnormals honoured; overflow as IEEE 754 specifies for the mode)."""
    f = get_format(fmt)
    x = np.asarray(x, dtype=np.float64)
    ax = np.abs(x)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        q = ulp(ax, f)
        k = ax / q
        fl = np.floor(k)
        frac = k - fl
        if mode == "rne":
            r = np.where(frac > 0.5, fl + 1, np.where(frac < 0.5, fl, fl + np.mod(fl, 2)))
        elif mode == "rna":
            r = np.where(frac >= 0.5, fl + 1, fl)
        elif mode == "rtz":
            r = fl
        elif mode == "rup":
            r = np.where(x > 0, np.ceil(k), fl)
        elif mode == "rdn":
            r = np.where(x < 0, np.ceil(k), fl)
        else:
            raise ValueError(f"unknown rounding mode {mode!r}")
        res = np.copysign(r * q, x)
        over = np.isfinite(x) & (np.abs(res) > f.max)
        to_inf = {"rne": np.ones_like(x, bool), "rna": np.ones_like(x, bool),
                  "rtz": np.zeros_like(x, bool), "rup": x > 0, "rdn": x < 0}[mode]
        res = np.where(over, np.where(to_inf & f.has_inf, np.copysign(np.inf, x),
                                      np.copysign(f.max, x)), res)
        res = np.where(np.isfinite(x), res, x)
    return res


def identify_rounding(x, out, fmt) -> dict:
    """Share of elements each rounding mode reproduces bit for bit, over the
    elements where the modes disagree (exactly representable inputs say nothing)."""
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    out = np.asarray(out, dtype=np.float64).reshape(-1)
    preds = {m: round_mode(x, fmt, m) for m in ROUNDING_MODES}
    informative = ~np.all([_same(preds["rne"], p) for p in preds.values()], axis=0)
    if not informative.any():
        informative = np.ones_like(x, bool)
    shares = {m: float(np.mean(_same(out[informative], p[informative])))
              for m, p in preds.items()}
    best = max(shares, key=lambda m: (shares[m], m == "rne"))
    return {"rounding_mode": best, "rounding_mode_name": ROUNDING_MODES[best],
            "rounding_matches": {m: round(s, 4) for m, s in shares.items()},
            "informative_elements": int(np.count_nonzero(informative))}
