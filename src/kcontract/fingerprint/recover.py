"""Recover a kernel's :class:`Recipe` from its outputs on the probes.

The estimation runs in stages, each settling one part of the design with the
parts before it fixed, and each done by *emulation*: every candidate value is
run through :class:`~.designs.Design` on the same probe rows, and the candidate
that reproduces the kernel's outputs bit for bit is chosen.  The share of rows a
value reproduces is its confidence; the values that do as well are its
alternatives.

1. ``fused_group`` and the order's interleaving (the ``group`` probe);
2. ``accumulator_bits`` and ``accumulator_rounding`` (the ``rounding`` probe,
   called twice: outputs that differ between identical calls are stochastic);
3. ``promotion_interval`` (the ``promotion`` probe; not measurable when the
   accumulator is nearly as wide as the 24-bit one it would be promoted to);
4. ``operand_format``, its rounding, and exact versus rounded products (the
   ``operands`` probe; a sum has no products);
5. subnormal inputs and outputs (the ``subnormal`` probe);
6. the reduction order, from the group pattern and from how many outputs on random
   inputs the recovered design reproduces bit for bit (the ``sweep``), which also
   gives the measured error against the reduction length beside each design's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ..formats import get_format, round_to
from . import probes as P
from .designs import Design
from .rounding import MODE_TEXT, MODES
from .targets import Target


@dataclass
class Field:
    """One estimated part of the recipe."""

    name: str
    value: Any
    confidence: float  # share of the probe rows the value reproduces (0..1)
    evidence: str
    alternatives: list = field(default_factory=list)  # values that reproduce as many rows

    @property
    def measured(self) -> bool:
        """False where the probes cannot see this part (the value is then None)."""
        return not self.evidence.startswith(("not measurable", "a sum ", "a sum:"))

    def as_dict(self) -> dict:
        return {"value": self.value, "measured": self.measured,
                "confidence": round(float(self.confidence), 3),
                "evidence": self.evidence, "alternatives": list(self.alternatives)}


@dataclass
class SweepPoint:
    length: int
    measured: float  # rms of |out - exact| / (|a| @ |b|)
    predicted: dict  # design label -> the same quantity under that design
    bitwise: float  # share of outputs the recovered design reproduces bit for bit

    def as_dict(self) -> dict:
        return {"length": self.length, "measured": self.measured,
                "predicted": dict(self.predicted), "bitwise": round(self.bitwise, 4)}


#: a recipe's fields, in the order it lists them
FIELD_ORDER = ("operand_format", "operand_rounding", "products", "accumulator_bits",
               "accumulator_rounding", "fused_group", "promotion_interval",
               "workspace_interval", "workspace_bits", "subnormal_inputs", "subnormal_outputs",
               "reduction_order", "score_operand_format", "score_bits")

#: the fields a C-PRC-01/04 violation states (value and confidence) and a report lists
STATED_FIELDS = tuple(f for f in FIELD_ORDER if f not in ("operand_rounding", "products"))


@dataclass
class Recipe:
    """What the kernel's reduction computes, field by field, with the evidence."""

    op: str
    input_format: str
    output_format: str
    fields: dict  # name -> Field, in FIELD_ORDER
    design: Design
    sweep: list = field(default_factory=list)
    probes_reproduced: float = 0.0  # share of all probe rows the design reproduces
    calls: int = 0
    seconds: float = 0.0
    notes: list = field(default_factory=list)

    def __getattr__(self, name):
        fields = self.__dict__.get("fields") or {}
        if name in fields:
            return fields[name].value
        raise AttributeError(name)

    def confidence(self, name: str) -> float:
        return self.fields[name].confidence

    def summary(self) -> str:
        f = self.fields
        op = f["operand_format"].value
        bits = f["accumulator_bits"].value
        least = "at least " if f["accumulator_bits"].evidence.startswith("at least") else ""
        parts = [f"{_short(op)} operands" if op else "operands not measured",
                 f"{least}{bits}-bit accumulator ({f['accumulator_rounding'].value})"]
        g = f["fused_group"].value
        parts.append(f"groups of {g}" if g and g > 1 else "one product per rounding")
        pi = f["promotion_interval"].value
        if pi and self.design.wide_bits >= self.design.accumulator_bits:
            parts.append(f"promoted to fp32 every {pi}")
        ws = f.get("workspace_interval")
        if ws is not None and ws.value:
            how = "stored in" if self.design.partials_rounded else "added into"
            parts.append(f"blocks of {ws.value} {how} a {f['workspace_bits'].value}-bit "
                         "workspace")
        if "score_bits" in f:
            sb = f["score_bits"]
            least = "at least " if sb.evidence.startswith("at least") else ""
            parts.append(f"scores from {_short(f['score_operand_format'].value)} q, k carry "
                         f"{least}{sb.value} bits")
        return ", ".join(parts)

    def as_dict(self) -> dict:
        return {"op": self.op, "input_format": self.input_format,
                "output_format": self.output_format, "summary": self.summary(),
                "recipe": {k: v.as_dict() for k, v in self.fields.items()},
                "design": self.design.as_dict(),
                "probes_reproduced": round(self.probes_reproduced, 4),
                "sweep": [s.as_dict() for s in self.sweep], "calls": self.calls,
                "seconds": round(self.seconds, 2), "notes": list(self.notes)}


def _short(fmt) -> str:
    return get_format(fmt).short if fmt else "?"


def _same(x, y) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return (x == y) | (np.isnan(x) & np.isnan(y))


def _share(design: Design, probe: P.Probe, obs, fin: str, fout: str, rows=None) -> float:
    pred = design.dots(probe.a, probe.b, fin, fout)
    ok = _same(pred, obs)
    if rows is not None:
        ok = ok[rows]
    return float(np.mean(ok)) if ok.size else 1.0


def _runs(js) -> str:
    js = list(js)
    if len(js) > 8:
        return ", ".join(str(j) for j in js[:6]) + f", ... ({len(js)} in all)"
    return ", ".join(str(j) for j in js) or "none"


class Recovery:
    def __init__(self, target: Target, op: str):
        self.t = target
        self.op = op
        self.fin = target.input_format
        self.fields: dict[str, Field] = {}
        self.notes: list[str] = []
        self.observed: list[tuple[P.Probe, np.ndarray]] = []

    def observe(self, probe: P.Probe, batch: Optional[int] = None) -> np.ndarray:
        """The kernel's outputs on ``probe``; ``batch``: at most that many rows per call
        (long rows: fewer per call)."""
        old = self.t.batch
        if batch is not None:
            self.t.batch = min(old, batch)
        try:
            obs = self.t.dots(probe.a, probe.b)
        finally:
            self.t.batch = old
        self.observed.append((probe, obs))
        return obs

    # -- stages -----------------------------------------------------------------
    def start(self) -> None:
        """Exact integers: a sum of 4 ones, exact in any accumulator of 2 bits or more
        (learns the output format on the way)."""
        t = self.t
        # where the op shows only results >= 2**floor: factors 2**ceil(floor / 2)
        c = 2.0 ** -(-max(t.floor or 0, 0) // 2) if t.operands == 2 else 1.0
        ones = np.full((2, 4), c)
        want = 4.0 * c * c
        obs = t.dots(ones, ones if t.operands == 2 else None)
        self.fout = t.output_format
        if not np.all(obs == want):
            from .targets import ProbeFailure
            raise ProbeFailure(f"the kernel does not sum 4 products {c * c:g} to {want:g} "
                               f"(got {obs.tolist()}): no inner product to fingerprint")
        self.scales = P.Scales.of(self.fin, self.fout, t.operands, floor=t.floor,
                                  signed=t.signed, term_operands=t.term_operands,
                                  headroom=t.headroom)

    def group(self) -> Design:
        probe = P.group_probe(self.scales)
        obs = self.observe(probe)
        small = 2.0 ** (self.scales.big - self.scales.gap)
        kept = obs == small
        js = np.array(probe.params)
        kept_js = js[kept]
        if not kept.any():
            self.fields["fused_group"] = Field(
                "fused_group", 1, 1.0,
                f"a term 2**-{self.scales.gap} of the running sum was lost beside it for every "
                f"j = 1..{js[-1]}: every product is rounded into the accumulator on its own")
            self.order_hint = None
            return Design(fused_group=1)
        last = int(kept_js[-1])
        scope = js <= last + 1
        best = []
        for g in range(2, 65):
            pred = (js % g) != g - 1
            best.append((float(np.mean(pred[scope] == kept[scope])), "group", g))
        for w in range(2, 65):
            pred = (js % w) == w - 1
            best.append((float(np.mean(pred[scope] == kept[scope])), "lanes", w))
        best.sort(key=lambda t: (-t[0], t[2]))
        score, kind, n = best[0]
        alts = [f"{k} {m}" for s, k, m in best[1:4] if s == score]
        lost = js[~kept & scope]
        if score < 1.0:
            period = next((T for T in range(2, 65) if np.array_equal(kept[:-T], kept[T:])),
                          None)
            self.order_hint = ("irregular", period, 1.0, last, _runs(kept_js))
            self.fields["fused_group"] = Field(
                "fused_group", 1, float(np.mean(~kept)),
                f"no group size explains which small terms survived (j = {_runs(kept_js)}): "
                "distant products meet before the small term is rounded, an order other than "
                "k order (see reduction_order); products are rounded into partial sums one at "
                "a time")
            return Design(fused_group=1)
        if kind == "lanes":
            self.order_hint = ("lanes", n, score, last)
            self.fields["fused_group"] = Field(
                "fused_group", 1, score,
                f"the small term survived only for j = {_runs(kept_js)} (j + 1 a multiple of "
                f"{n}): big and -big met in one partial sum, not in a fused group")
            return Design(fused_group=1)
        self.order_hint = None
        tail = "" if last + 1 >= js[-1] else (f"; lost for every j > {last} (a longer "
                                              "chunk boundary: see promotion_interval)")
        self.fields["fused_group"] = Field(
            "fused_group", n, score,
            f"2**{self.scales.big} + 2**{self.scales.big - self.scales.gap} - 2**"
            f"{self.scales.big} at k = 0, j, j+1 kept the small term except at j = "
            f"{_runs(lost)} (j = {n - 1} mod {n}): {n} products and the accumulator are summed "
            f"exactly before each rounding{tail}", alts)
        return Design(fused_group=n)

    def rounding(self, base: Design) -> Design:
        g = base.fused_group
        probe = P.rounding_probe(self.scales, g)
        obs = self.observe(probe)
        again = self.t.dots(probe.a, probe.b)
        if not np.all(_same(obs, again)):
            differ = int(np.count_nonzero(~_same(obs, again)))
            self.fields["accumulator_rounding"] = Field(
                "accumulator_rounding", "stochastic", 1.0,
                f"identical calls gave different outputs on {differ} of {probe.rows} rows "
                "(a deterministic rounding mode cannot)")
        Q = self.scales.gap
        B = self.scales.big
        # the swamping rows bound the bits: a term 2**-q survives up to q = p - 1 in every
        # mode; candidates a few bits either side of that are emulated
        plus = [q for (tag, q), o in zip(probe.params, obs) if tag == "+" and o == 2.0 ** (B - q)]
        q0 = max(plus) if plus else 0
        ps = range(max(2, q0 - 3), min(Q + 2, 52, q0 + 5) + 1)
        scores = {}
        for mode in MODES:
            for p in ps:
                d = base.with_(accumulator_bits=p, accumulator_rounding=mode)
                scores[(p, mode)] = _share(d, probe, obs, self.fin, self.fout)
        top = max(scores.values())
        tied = [k for k, v in scores.items() if v == top]
        tied.sort(key=lambda k: (MODES.index(k[1]), k[0]))
        p, mode = tied[0]
        bits_alt = sorted({k[0] for k in tied if k[0] != p})
        mode_alt = sorted({k[1] for k in tied if k[1] != mode}, key=MODES.index)
        survive = [q for tag, q in probe.params if tag == "+"]
        kept = [q for (tag, q), o in zip(probe.params, obs)
                if tag == "+" and o == 2.0 ** (self.scales.big - q)]
        qmax = max(kept) if kept else 0
        lower = p >= Q + 1
        ev = (f"big + 2**-q * big - big kept the small term for q <= {qmax} of 1..{max(survive)}: "
              f"{p} significand bits")
        if lower:
            ev = f"at least {p} bits (the probes resolve at most {Q + 1}): " + ev
        self.fields["accumulator_bits"] = Field("accumulator_bits", p, top, ev, bits_alt)
        if "accumulator_rounding" not in self.fields:
            second = max((v for k, v in scores.items() if k[0] == p and k[1] != mode),
                         default=0.0)
            self.fields["accumulator_rounding"] = Field(
                "accumulator_rounding", mode, top,
                f"{MODE_TEXT[mode]} reproduces {top:.0%} of {probe.rows} swamping, tie and "
                f"cancellation rows; the next mode at {p} bits {second:.0%}", mode_alt)
        return base.with_(accumulator_bits=p, accumulator_rounding=mode)

    def promotion(self, base: Design) -> Design:
        probe = P.promotion_probe(self.scales, base.accumulator_bits, base.fused_group)
        if probe is None:
            self.fields["promotion_interval"] = Field(
                "promotion_interval", None, 0.5,
                f"not measurable: a {base.accumulator_bits}-bit accumulator is too close to "
                "the 24-bit one partial sums would be promoted to (no term is lost in one and "
                "kept in the other)")
            return base
        obs = self.observe(probe, batch=16)  # long rows: fewer per call
        small = probe.a[0, 1] * (probe.b[0, 1] if probe.b is not None else 1.0)
        W = np.array(probe.params)
        fout = self.fout

        def pred(Pi):
            c = np.zeros_like(W) if Pi is None else np.maximum(W - Pi + 1, 0)
            return get_format(fout).dtype.type(0) + P.round_to(c * small, fout)

        cands = [None] + list(range(2, W[-1] + 1))
        scores = {Pi: float(np.mean(_same(pred(Pi), obs))) for Pi in cands}
        top = max(scores.values())
        tied = [Pi for Pi, s in scores.items() if s == top]
        Pi = tied[0]
        counts = np.rint(obs / small).astype(int)
        if Pi is None:
            ev = (f"2**{self.scales.big} swamped every small term up to k = {W[-1]} and -2**"
                  f"{self.scales.big} cancelled it exactly: no partial sum left the "
                  f"{base.accumulator_bits}-bit accumulator within {W[-1]} products")
        else:
            first = int(W[np.argmax(counts > 0)])
            ev = (f"small terms lost beside 2**{self.scales.big} reappear after k = {Pi - 1}: "
                  f"{counts[np.argmax(counts > 0)]} of {first} kept for W = {first}, "
                  f"W + 1 - kept = {Pi} for every window: partial sums leave the narrow "
                  f"accumulator every {Pi} products")
        self.fields["promotion_interval"] = Field(
            "promotion_interval", Pi, top, ev, [t for t in tied[1:4]])
        return base.with_(promotion_interval=Pi)

    def workspace(self, base: Design) -> Design:
        """Blocks summed in a wide accumulator whose partial sums are added into a
        narrower workspace (a split-K product with an fp16 workspace): the block size
        from where a small term is lost between big and -big, the workspace's bits by
        emulation (the design's promotion with ``wide_bits`` below ``accumulator_bits``)."""
        names = ("workspace_interval", "workspace_bits")
        probe = None
        if base.promotion_interval is None and base.accumulator_bits >= P.WORKSPACE_GAP + 2:
            probe = P.workspace_probe(self.scales)
        if probe is None:
            why = ("not measurable: " + (
                "partial sums are promoted (see promotion_interval)" if base.promotion_interval
                else f"a {base.accumulator_bits}-bit accumulator rounds the small terms itself"
                if base.accumulator_bits < P.WORKSPACE_GAP + 2 else
                f"the {_short(self.fout)} output cannot show the probe's sums"))
            for n in names:
                self.fields[n] = Field(n, None, 0.5, why)
            return base
        obs = self.observe(probe, batch=32)
        js = np.array(probe.params)
        want = base.dots(probe.a, probe.b, self.fin, self.fout)
        lost = ~_same(obs, want)
        lost_js = js[lost]
        if not lost.any():
            ev = (f"big + 2**-{P.WORKSPACE_GAP} big - big at k = 0, j, j+1 kept the small term "
                  f"for every j = 1..{js[-1]}: no block boundary narrows the partial sums")
            for n in names:
                self.fields[n] = Field(n, None, 1.0, ev)
            return base
        C = int(lost_js[0]) + 1
        bp = P.workspace_bits_probe(self.scales, C)
        bobs = self.observe(bp)
        shares = {}
        for b in range(2, P.WORKSPACE_GAP + 2):
            d = base.with_(promotion_interval=C, wide_bits=b)
            shares[b] = _share(d, bp, bobs, self.fin, self.fout)
        top = max(shares.values())
        b = [k for k, v in shares.items() if v == top][0]
        alts = [k for k, v in shares.items() if v == top and k != b]
        # partial sums added as they are, or stored in the workspace first (then the
        # small term is lost for every j past the first boundary: small - big rounds)
        variants = {r: base.with_(promotion_interval=C, wide_bits=b, partials_rounded=r)
                    for r in (False, True)}
        fit = {r: _share(d, probe, obs, self.fin, self.fout) for r, d in variants.items()}
        rounded = fit[True] > fit[False]
        d = variants[rounded]
        conf = fit[rounded]
        ev = (f"big + 2**-{P.WORKSPACE_GAP} big - big at k = 0, j, j+1 lost the small term at "
              f"j = {_runs(lost_js)} ({'every j from ' + str(C - 1) if rounded else f'j = {C - 1} mod {C}'}"
              f"): blocks of {C} products are summed exactly and their partial sums "
              f"{'stored in' if rounded else 'added into'} a narrower workspace (the design "
              f"reproduces {conf:.0%} of {probe.rows} rows)")
        self.fields["workspace_interval"] = Field("workspace_interval", C, conf, ev)
        lift = self.scales.lift
        kept = [q for q, o in zip(bp.params, bobs) if o != lift]
        self.fields["workspace_bits"] = Field(
            "workspace_bits", b, top,
            f"2**-q big across the block boundary kept for q <= {max(kept) if kept else 0}: a "
            f"{b}-bit workspace (nearest) reproduces {top:.0%} of {bp.rows} rows", alts)
        return d

    def operands(self, base: Design) -> Design:
        if self.t.term_operands:
            return self.terms(base)
        probe = P.operand_probe(self.scales, base.fused_group)
        if probe is None:
            for name in ("operand_format", "operand_rounding", "products"):
                self.fields[name] = Field(
                    name, self.fin if name == "operand_format" else None, 1.0,
                    f"not measurable: a {self.op} has no products, its terms are the "
                    f"{_short(self.fin)} inputs")
            self.fields["operand_format"].evidence = (f"a {self.op} sums its {_short(self.fin)} "
                                                      "inputs as given")
            return base
        obs = self.observe(probe)
        cancel = np.array([t.startswith("cancel") for t in probe.params])
        fmt, rnd, d = self._operand_choice(base, probe, obs, ~cancel,
                                           ("one-hot products of many-bit operands", "operands"))
        op_bits = get_format(fmt).precision
        exact, conf = True, 1.0
        if 2 * op_bits <= base.accumulator_bits:
            ev = (f"a product of two {_short(fmt)} operands has at most {2 * op_bits} bits: "
                  f"exact in a {base.accumulator_bits}-bit accumulator either way")
        elif cancel.any():
            ex = d.dots(probe.a[cancel], probe.b[cancel], self.fin, self.fout)
            rd = d.with_(products_exact=False).dots(probe.a[cancel], probe.b[cancel], self.fin,
                                                    self.fout)
            o = obs[cancel]
            sep = ~_same(ex, rd)
            hit = _same(o, ex) & sep
            js = sorted({int(t.split()[1]) for t, h in zip(np.array(probe.params)[cancel], hit)
                         if h})
            exact = bool(hit.any())
            if not sep.any():
                # the design rounds the residual itself (a narrow workspace, a narrow output):
                # both kinds of product give the same outputs
                self.fields["products"] = Field(
                    "products", None, 1.0,
                    f"not measurable: the recovered design rounds 1 - (1 + 2**-12)**2 to "
                    f"{o[0]:.9g} with exact and with rounded products alike")
                return d
            if exact:
                ev = (f"1 - (1 + 2**-12)**2 came out exactly ({o[hit][0]:.9g}) with the pair at "
                      f"k = 0 and k = {_runs(js)} (fused multiply-adds: a product meets the "
                      "partial sum unrounded)")
            else:
                ev = (f"1 - (1 + 2**-12)**2 came out rounded ({o[0]:.9g}) for every pair at "
                      f"k = 0, j (j = 1..{probe.a.shape[1] - 1}): products are rounded before "
                      "they are added")
                conf = float(np.mean(_same(o, rd)[sep])) if sep.any() else 0.0
        else:
            ev = "the operands have too few bits to tell exact from rounded products"
            conf = 0.0
        self.fields["products"] = Field("products", "exact" if exact else "rounded", conf, ev)
        return d.with_(products_exact=exact)

    def terms(self, base: Design) -> Design:
        """The format a one-operand kernel rounds its terms to (attention's v): one-hot
        many-bit terms, emulated with the accumulator found before (a narrow accumulator
        rounds a lone term too; x - x tells it from rounded terms)."""
        probe = P.term_probe(self.scales)
        obs = self.observe(probe)
        _, _, d = self._operand_choice(base, probe, obs, None,
                                       ("one-hot many-bit terms and x - x pairs", "terms"))
        self.fields["products"] = Field(
            "products", None, 1.0, f"not measurable: the {self.op} probe sums terms (its other "
            "factor is fixed)")
        return d

    def _operand_choice(self, base: Design, probe: P.Probe, obs, rows, what):
        """The operand format and rounding (each candidate format of the input, rounded to
        nearest or toward zero) whose emulation reproduces the most of ``obs`` on ``rows``
        (a mask; None: all): sets the ``operand_format`` and ``operand_rounding`` fields
        and returns (format, rounding, design).  ``what``: (the probe's rows, the word for
        what is rounded), for the evidence."""
        rows_text, noun = what
        scores = {}
        for fmt in P.OPERAND_CANDIDATES.get(self.fin, (self.fin,)):
            for rnd in ("nearest", "toward_zero"):
                d = base.with_(operand_format=fmt, operand_rounding=rnd)
                scores[(fmt, rnd)] = _share(d, probe, obs, self.fin, self.fout, rows)
        top = max(scores.values())
        tied = [k for k, v in scores.items() if v == top]
        fmt, rnd = tied[0]
        fmts = sorted({k[0] for k in tied if k[0] != fmt})
        rnds = sorted({k[1] for k in tied if k[1] != rnd})
        share_fmt = {f: max(v for k, v in scores.items() if k[0] == f)
                     for f in dict.fromkeys(k[0] for k in scores)}
        others = ", ".join(f"{_short(f)} {s:.0%}" for f, s in sorted(share_fmt.items(),
                           key=lambda t: -t[1]) if f != fmt)
        n = probe.rows if rows is None else int(np.count_nonzero(rows))
        self.fields["operand_format"] = Field(
            "operand_format", fmt, top,
            f"{rows_text} match {noun} rounded to {_short(fmt)} on {top:.0%} of {n} rows "
            f"(others: {others or 'none'})", fmts)
        given = fmt == self.fin
        self.fields["operand_rounding"] = Field(
            "operand_rounding", None if given else rnd, 1.0 if given else top,
            f"{noun} are used as given" if given else f"{MODE_TEXT[rnd]} into {_short(fmt)}",
            [] if given else rnds)
        return fmt, rnd, base.with_(operand_format=None if given else fmt, operand_rounding=rnd)

    def scores(self) -> None:
        """Attention's q k^T (the p @ v stages see only v): rows read through the softmax
        (see :meth:`AttentionTarget.scores`), emulated for each candidate operand format
        of q and k and each number of bits the scores carry into the softmax (their
        accumulator or their storage, whichever is narrower)."""
        rng = np.random.default_rng(0xF3)
        f = get_format(self.fin)
        D = self.t.score_width
        n = 16

        def sig(count, nbits):
            return 1.0 + rng.integers(0, 2 ** (nbits - 1), count) / 2.0 ** (nbits - 1)
        bits = f.precision
        qa, kb, tags = [], [], []

        def row(pairs, tag):
            q, k = np.zeros(D), np.zeros(D)
            for d, (x, y) in enumerate(pairs):
                q[d], k[d] = x, y
            qa.append(q)
            kb.append(k)
            tags.append(tag)
        for x in sig(n, bits):
            row([(x, 4.0)], "q many-bit")
        for y in sig(n, bits):
            row([(4.0, y)], "k many-bit")
        for x, y in zip(sig(n, min(bits, 11)), sig(n, min(bits, 11))):
            row([(x, 4.0 * y)], "22-bit score")
        for j in range(1, 23):
            row([(1.0, 4.0), (2.0 ** -j, 4.0)], f"1 + 2**-{j}")
        qa = round_to(np.array(qa), f)
        kb = round_to(np.array(kb), f)
        pv = self.fields.get("accumulator_bits")
        est, tol = self.t.scores(qa, kb, pv.value if pv is not None else None)
        ok = np.isfinite(est) & np.isfinite(tol)
        cands = {}
        for fmt in P.OPERAND_CANDIDATES.get(self.fin, (self.fin,)):
            for p in list(range(4, 25)) + [53]:
                d = Design(operand_format=fmt, accumulator_bits=p)
                pred = d.dots(qa, kb, self.fin, "float64") / np.sqrt(D)
                with np.errstate(invalid="ignore"):
                    hit = np.abs(est - pred) <= tol
                cands[(fmt, p)] = float(np.mean(hit[ok])) if ok.any() else 0.0
        top = max(cands.values())
        tied = [k for k, v in cands.items() if v == top]
        order = P.OPERAND_CANDIDATES.get(self.fin, (self.fin,))
        tied.sort(key=lambda k: (order.index(k[0]), -k[1]))
        fmt = tied[0][0]
        ps = sorted(p for g, p in tied if g == fmt)
        resolve = int(np.floor(-np.log2(np.median(tol[ok])))) if ok.any() else 0
        p = ps[0]
        least = ps[-1] >= 24 and p >= min(resolve, 24) - 2
        others = sorted({g for g, _ in tied if g != fmt})
        self.fields["score_operand_format"] = Field(
            "score_operand_format", fmt, top,
            f"scores of one-hot q . k products with many-bit q or k, read through a two-key "
            f"softmax (to about 2**-{resolve}), match q and k rounded to {_short(fmt)} on "
            f"{top:.0%} of {int(ok.sum())} rows", others)
        if least:
            ev = (f"at least {p} bits (the softmax readout resolves about 2**-{resolve}): 22-bit "
                  f"scores and 1 + 2**-j for j up to {min(resolve, 22)} came through")
        else:
            lost = [t for t, h in zip(tags, np.abs(est - (qa * kb).sum(axis=1) / 4) > tol)
                    if h and t.startswith("1 +")]
            ev = (f"the scores carry {p} significand bits into the softmax: 22-bit products and "
                  f"{', '.join(lost[:3]) or 'the many-bit rows'} were rounded "
                  f"({top:.0%} of rows reproduced)")
        self.fields["score_bits"] = Field("score_bits", p, top, ev,
                                          [x for x in ps[1:4]] if not least else [])

    def subnormals(self, base: Design) -> Design:
        if not self.t.subnormals:
            for which in ("inputs", "outputs"):
                self.fields[f"subnormal_{which}"] = Field(
                    f"subnormal_{which}", None, 0.0,
                    f"not measurable: the {self.op} does not show subnormal terms or results "
                    "as they are")
            return base
        probe = P.subnormal_probe(self.scales)
        obs = self.observe(probe)
        tags = np.array(probe.params)
        for which, attr in (("input", "flush_inputs"), ("output", "flush_outputs")):
            rows = tags == which
            name = f"subnormal_{which}s"
            if not rows.any():
                self.fields[name] = Field(name, None, 0.0,
                                          f"not measurable: no product of normal "
                                          f"{_short(self.fin)} operands is subnormal in "
                                          f"{_short(self.fout)}")
                continue
            keep = _share(base.with_(**{attr: False}), probe, obs, self.fin, self.fout, rows)
            flush = _share(base.with_(**{attr: True}), probe, obs, self.fin, self.fout, rows)
            same = np.array_equal(base.with_(**{attr: False}).dots(probe.a, probe.b, self.fin,
                                                                  self.fout)[rows],
                                  base.with_(**{attr: True}).dots(probe.a, probe.b, self.fin,
                                                                 self.fout)[rows])
            if same:
                self.fields[name] = Field(name, None, 0.0,
                                          "not measurable: the operand format cannot hold the "
                                          "subnormal probe")
                continue
            value = "flush" if flush > keep else "preserve"
            what = ("subnormal operands times a large factor" if which == "input" else
                    "normal products whose sum is subnormal")
            self.fields[name] = Field(name, value, max(keep, flush),
                                      f"{what}: {'zero' if value == 'flush' else 'kept'} "
                                      f"({obs[rows][0]:.6g})")
            base = base.with_(**{attr: value == "flush"})
        return base

    def sweep(self, design: Design) -> list[SweepPoint]:
        points = []
        ieee = Design("fp32 FMA")
        shares = []
        for K in P.SWEEP_LENGTHS:
            probe = P.sweep_probe(self.scales, K)
            obs = self.t.grid(probe.a, probe.b)
            if probe.b is not None:
                side = probe.a.shape[0]
                a = np.repeat(probe.a, side, axis=0)
                b = np.tile(probe.b, (side, 1))
            else:
                a, b = probe.a, None
            prod = a if b is None else a * b
            exact = np.sum(prod, axis=1)
            mag = np.sum(np.abs(prod), axis=1)

            def rms(x):
                with np.errstate(all="ignore"):
                    return float(np.sqrt(np.mean(((x - exact) / mag) ** 2)))
            mine = design.dots(a, b, self.fin, self.fout)
            share = float(np.mean(_same(mine, obs)))
            shares.append(share)
            points.append(SweepPoint(K, rms(obs), {"recovered": rms(mine),
                                                   "fp32 FMA": rms(ieee.dots(a, b, self.fin,
                                                                             self.fout))}, share))
        hint = getattr(self, "order_hint", None)
        low = min(shares)
        if hint is not None and hint[0] == "irregular":
            rep = (f"; the pattern repeats every {hint[1]} products (an unrolled or blocked "
                   "kernel)" if hint[1] else "")
            self.fields["reduction_order"] = Field(
                "reduction_order", None, 1.0 - low,
                f"not identified: big at k = 0 and -big at k = j+1 cancelled before the small "
                f"term at k = j was rounded for j = {hint[4]}{rep}; a sequential order "
                f"reproduces {low:.1%} of the outputs on random inputs bit for bit")
        elif hint is not None:
            end = ("" if hint[3] + 2 >= P.GROUP_SCAN else
                   f", combined in blocks beyond k = {hint[3] + 1} (blocked or pairwise)")
            self.fields["reduction_order"] = Field(
                "reduction_order", f"{hint[1]} interleaved partial sums{end}", hint[2],
                f"big at k = 0 and -big at k = j+1 cancel exactly, keeping the small term at k = "
                f"j, only when j + 1 is a multiple of {hint[1]} (j <= {hint[3]}): each of "
                f"{hint[1]} partial sums takes every {hint[1]}th product; the sequential design "
                f"reproduces {low:.1%} of the outputs on random inputs bit for bit")
        elif low >= 0.999:
            g = design.fused_group
            self.fields["reduction_order"] = Field(
                "reduction_order", "sequential" + (f" in groups of {g}" if g > 1 else ""), low,
                f"the recovered design in k order reproduces {low:.1%} of the outputs on random "
                f"inputs bit for bit at K = {', '.join(str(p.length) for p in points)}")
        else:
            ratio = points[-1].measured / max(points[-1].predicted["recovered"], 1e-300)
            self.fields["reduction_order"] = Field(
                "reduction_order", None, 1.0 - low,
                f"not identified: a sequential order reproduces only {low:.1%} of the outputs on "
                f"random inputs bit for bit (the error level is {ratio:.2f} x the sequential "
                f"design's at K = {points[-1].length}: a blocked or tree order)")
        return points


def recover(target: Target, op: str) -> Recipe:
    """The recipe of ``target``'s kernel (all stages; see the module docstring)."""
    t0 = time.perf_counter()
    r = Recovery(target, op)
    r.start()
    d = r.group()
    d = r.rounding(d)
    d = r.promotion(d)
    d = r.workspace(d)
    d = r.operands(d)
    d = r.subnormals(d)
    if hasattr(target, "scores"):
        r.scores()
    d = d.with_(name="recovered", output_format=r.fout)
    sweep = r.sweep(d)
    total = sum(pr.rows for pr, _ in r.observed)
    hit = sum(_share(d, pr, obs, r.fin, r.fout) * pr.rows for pr, obs in r.observed)
    fields = {k: r.fields[k] for k in FIELD_ORDER if k in r.fields}
    return Recipe(op=op, input_format=r.fin, output_format=r.fout, fields=fields, design=d,
                  sweep=sweep, probes_reproduced=hit / max(total, 1), calls=target.calls,
                  seconds=time.perf_counter() - t0, notes=r.notes)


__all__ = ["Field", "Recipe", "SweepPoint", "recover", "FIELD_ORDER", "STATED_FIELDS"]
