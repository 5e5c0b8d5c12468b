"""The exceptional-values family (C-EXC-01..02): protocols and signature detectors.

Protocols
    ``exceptional``  (C-EXC-01) NaN, +Inf and -Inf injected at chosen positions of
                     the op's injection inputs (its ``exceptional_targets``), a row holding
                     +Inf with -Inf and one holding NaN with +Inf, finite inputs
                     whose results overflow the output format (the op's
                     ``overflow_inputs``, where it declares them), and clean cases.
                     The reference is the op's float64 oracle under the declared
                     ``nan`` policy (:func:`policy_reference`); with ``nan=raise``
                     every call on a non-finite input must raise instead.
    ``oob``          (C-EXC-02) embedding calls with one out-of-range index value
                     each (-1, -V, -V-1, -2**31; V, V+1, 2**31-1) mixed with in-range
                     ones, plus an all-in-range control call; each call's behaviour is
                     classified (raise, clamp, zero, wrap, garbage, crash, hang) and
                     compared with the declared ``oob`` policy.

Detectors
    ``exceptional_values``  what went wrong, by position: NaN or Inf swallowed (with the
                            input position that carried it and what replaced it), Inf
                            where NaN was due or the reverse, new NaN/Inf on finite
                            inputs, and the overflow behaviour observed against the
                            declared one.
    ``oob_behaviour``       the behaviour observed below 0 and at or above V, per index,
                            against the declared policy.

The ``mask`` policy (also in docs/suite-exceptional.md): a non-finite input element is
*absent*; what that means for an op is its ``policy_reference`` capability (by default
it contributes as a zero; ops that normalise over a row redefine it over the finite
elements).
"""
from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np

from ..check.engine import Comparison, Context
from ..check.verdict import Diagnosis
from ..diagnosis import claims as declared_claims, establish
from ..formats import get_format
from ..language.registry import detector, protocol
from ..ops import upcast
from ..ops.base import Lacks
from ..ops.families import inject
from ..ops.gather import expected_rows
from .common import lacking

KINDS = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}
POLICIES = ("propagate", "mask", "raise")


# -- classes of values ---------------------------------------------------------------------

def value_class(v) -> np.ndarray:
    """'nan', '+inf', '-inf' or 'finite', elementwise."""
    v = np.asarray(v, dtype=np.float64)
    out = np.full(v.shape, "finite", dtype=object)
    out[np.isnan(v)] = "nan"
    out[np.isposinf(v)] = "+inf"
    out[np.isneginf(v)] = "-inf"
    return out


def _label(c: str) -> str:
    return {"nan": "NaN", "+inf": "+Inf", "-inf": "-Inf", "finite": "finite"}[c]


def _fmt_value(v: float) -> str:
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "-0" if np.signbit(v) else "0"
    return f"{v:.4g}"


# -- the reference under a policy -------------------------------------------------------------

def policy_reference(op, inputs: dict, policy: str, kw: Optional[dict] = None):
    """The float64 reference under the ``nan`` policy (``raise`` behaves as ``propagate``
    on the inputs where it returns): the op's ``policy_reference`` capability on the
    upcast inputs.  Returns ``(ref, x, extra)``: ``x`` the inputs the tolerance quantities
    are computed from, ``extra`` names that override or add to the op's quantities
    (``alt``/``has_alt``: a second accepted result)."""
    return op.policy_reference(upcast(inputs), policy, **dict(kw or {}))


# -- inputs ---------------------------------------------------------------------------------

def _store_like(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values, dtype=np.float64).astype(like.dtype)


def _mixed(values: np.ndarray, rng) -> tuple[np.ndarray, list]:
    """+Inf and -Inf in one row, NaN and +Inf in another (2-D arrays; for 1-D: the first
    four positions)."""
    out = np.array(values, dtype=np.float64, copy=True)
    placed = []
    if out.ndim >= 2 and out.shape[-1] >= 2:
        rows = rng.choice(out.shape[-2], size=min(2, out.shape[-2]), replace=False)
        plan = [("inf", "-inf"), ("nan", "inf")]
        for r, kinds in zip(rows, plan):
            cols = rng.choice(out.shape[-1], size=2, replace=False)
            for c, k in zip(cols, kinds):
                idx = (0,) * (out.ndim - 2) + (int(r), int(c))
                out[idx] = KINDS[k]
                placed.append((idx, k))
    else:
        flat = out.reshape(-1)
        for i, k in enumerate(("inf", "-inf", "nan")[: flat.size]):
            flat[i] = KINDS[k]
            placed.append((np.unravel_index(i, out.shape), k))
    return out, placed


def exceptional_cases(ctx: Context):
    """(case, inputs, placed) for every probe; ``placed``: [(input, index, kind)]."""
    count = int(ctx.param("count", 2))
    op = ctx.op
    tgt, *others = op.exceptional_targets()
    for shape in ctx.shapes():
        for family in ctx.protocol.families:
            for trial in range(ctx.protocol.trials):
                base = ctx.inputs(shape, family, trial)
                yield ctx.case(shape, family, trial, probe="finite"), base, []
                rng = ctx.rng(op.describe_shape(shape), family, trial, "exceptional")
                probes = [(k, tgt, (k,)) for k in ("nan", "inf", "-inf")] + [("mixed", tgt, None)]
                probes += [(n, n, ("nan", "inf", "-inf")) for n in others]
                for label, name, kinds in probes:
                    vals = upcast({name: base[name]})[name]
                    if kinds is None:
                        new, pos = _mixed(vals, rng)
                    else:
                        new, pos = inject(vals, rng, kinds=kinds, count=count)
                    inputs = dict(base)
                    inputs[name] = _store_like(new, base[name])
                    placed = [(name, tuple(int(i) for i in idx), k) for idx, k in pos]
                    yield ctx.case(shape, family, trial, probe=label), inputs, placed
            if ctx.param("overflow", True):
                rng = ctx.rng(op.describe_shape(shape), "overflow")
                inputs = op.overflow_inputs(shape, ctx.dtype, rng)
                if not isinstance(inputs, Lacks) and inputs is not None:
                    yield ctx.case(shape, "overflow", 0, probe="overflow"), inputs, []


# -- the protocol ------------------------------------------------------------------------------

def _placed_text(placed, limit: int = 3) -> str:
    parts = [f"{_label({'inf': '+inf'}.get(k, k))} at {n}[{', '.join(map(str, i))}]"
             for n, i, k in placed[:limit]]
    more = f" (+{len(placed) - limit} more)" if len(placed) > limit else ""
    return ", ".join(parts) + more


@protocol("exceptional", oracles=("policy",),
          params={"count": (int, 2), "overflow": (bool, True), "kwargs": (dict, {})},
          provides=("alt", "has_alt"),
          description="NaN/+Inf/-Inf injected at chosen positions, mixed rows, overflow-"
                      "provoking finite inputs and clean cases; reference: the float64 "
                      "oracle under the declared nan policy; nan=raise: calls on non-finite "
                      "inputs must raise")
def exceptional(ctx: Context):
    t0 = time.perf_counter()
    policy = ctx.claims.nan
    records: list[dict] = []
    comps: list[Comparison] = []
    for case, inputs, placed in exceptional_cases(ctx):
        t1 = time.perf_counter()
        ref, xq, extra = policy_reference(ctx.op, inputs, policy, ctx.kwargs())
        ref = declared_claims.exceptional_reference(ctx, inputs, ref)
        ctx.timings["oracle"] += time.perf_counter() - t1
        res = ctx.call(inputs)
        rec = {"case": case, "inputs": inputs, "placed": placed, "status": res.status,
               "error": res.describe() if not res.ok else "", "cmp": None}
        records.append(rec)
        overflowing = not placed and bool(np.any(~np.isfinite(ref)))
        if placed and policy == "raise":
            rec["finding"] = None if res.status == "raised" else (
                "returned" if res.ok else res.status)
            continue
        if placed and res.status in ("raised", "crashed", "timeout"):
            rec["finding"] = res.status
            continue
        if policy == "raise" and overflowing and res.status == "raised":
            continue  # raising instead of returning a non-finite result is allowed
        out = ctx.validate(res, case, inputs)
        cmp = ctx.evaluate(case, inputs, out, ref, x=xq, extra=extra)
        cmp = establish.exceptional_comparison(ctx, cmp, policy)  # finite errors: not ours
        rec["cmp"] = cmp
        comps.append(cmp)
    findings = [r for r in records if r.get("finding")]
    failing = [c for c in comps if not c.passed]
    rows = [{"case": r["case"].describe(), "probe": r["case"].extra.get("probe"),
             "status": r["status"], "finding": r.get("finding"),
             "passed": (not r.get("finding")) and (r["cmp"] is None or r["cmp"].passed),
             "mismatched": r["cmp"].mismatched if r["cmp"] is not None else None,
             "injected": _placed_text(r["placed"]) if r["placed"] else ""} for r in records]
    details = {"cases": rows, "policy": policy, "overflow": ctx.claims.overflow}
    if not findings and not failing:
        return ctx.passed(f"{len(records)} cases conform (nan={policy}, "
                          f"overflow={ctx.claims.overflow})", details=details,
                          seconds=time.perf_counter() - t0)
    diag = ctx.run_detector({"records": records, "comparisons": comps, "policy": policy})
    sig = dict(diag.quantities)
    headline = diag.summary or ctx.contract.signature.summary
    nbad = len(findings) + len(failing)
    message = f"{headline} ({nbad} of {len(records)} cases fail)"
    code = f"{ctx.contract.cls}.{diag.code}" if diag.code else None
    if failing:
        from .common import worst
        v = ctx.violation(worst(failing), message=message, quantities=sig, code=code)
    else:
        v = ctx.violation(None, message=message, quantities=sig, case=findings[0]["case"],
                          code=code)
    return ctx.violated(v, signature=sig, details=details, seconds=time.perf_counter() - t0)


# -- the detector ------------------------------------------------------------------------------

def _sources(op, placed, idx: tuple) -> list:
    """The injected input elements the output element ``idx`` depends on (the op's
    ``depends_on`` capability)."""
    return [(n, pos, k) for n, pos, k in placed if op.depends_on(n, tuple(pos), tuple(idx))]


def _at(idx) -> str:
    return "out[" + ", ".join(str(int(i)) for i in idx) + "]"


def _replacement(ctx: Context, rec: dict, mask: np.ndarray) -> str:
    """What a kernel put where a NaN/Inf was due: 0, +-max, a uniform row, the mask
    result, or other finite values."""
    cmp: Comparison = rec["cmp"]
    out = cmp.out
    vals = out[mask]
    fmt = ctx.op.output_format(ctx.dtype)
    if vals.size and np.all(vals == 0):
        return "replaced by 0"
    if vals.size and np.all(np.abs(vals) == fmt.max):
        return "replaced by +-max (as numpy.nan_to_num does)"
    if ctx.op.normalised_rows and out.ndim >= 2:
        rows = np.unique(np.nonzero(mask)[0])
        n = out.shape[-1]
        if rows.size and np.all(np.abs(out[rows] - 1.0 / n) <= 1e-3 / n):
            return f"the row replaced by a uniform distribution (1/{n})"
    try:
        mref, _, _ = policy_reference(ctx.op, rec["inputs"], "mask", ctx.kwargs())
        with np.errstate(all="ignore"):
            close = np.abs(out[mask] - mref[mask]) <= 1e-2 * (np.abs(mref[mask]) + 1e-6) + 1e-6
        if close.size and np.all(close):
            return "as if the non-finite inputs were absent (nan=mask semantics)"
    except Exception:  # diagnostic only
        pass
    return f"replaced by finite values (e.g. {_fmt_value(float(vals.reshape(-1)[0]))})"


def _overflow_class(out: np.ndarray, ref: np.ndarray, fmax: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        right_inf = np.isinf(out) & (np.sign(out) == np.sign(ref))
        sat = np.isfinite(out) & (np.abs(out) == fmax) & (np.sign(out) == np.sign(ref))
    cls = np.full(out.shape, "garbage", dtype=object)
    cls[right_inf] = "inf"
    cls[np.isnan(out)] = "nan"
    cls[sat] = "saturate"
    return cls


_OVERFLOW_WORDS = {"inf": "inf (+-Inf)", "nan": "nan (NaN)", "saturate": "saturate (+-max)",
                   "garbage": "wrapped or garbage finite values"}

_CATEGORY_TEXT = {
    "nan-swallowed": "NaN swallowed",
    "inf-swallowed": "Inf swallowed",
    "inf-for-nan": "Inf where NaN is due",
    "nan-for-inf": "NaN where Inf is due",
    "wrong-sign-inf": "Inf of the wrong sign",
    "spurious-nan": "NaN where a finite value is due",
    "spurious-inf": "Inf where a finite value is due",
    "value": "finite values beyond tolerance",
}


@detector("exceptional_values",
          "where NaN/Inf were swallowed, misclassified or created, with the input position "
          "that carried them; the overflow behaviour observed against the declared one")
def exceptional_values(ctx: Context, evidence) -> Diagnosis:
    records = list(evidence.get("records") or [])
    policy = evidence.get("policy", ctx.claims.nan)
    fmt = ctx.op.output_format(ctx.dtype)
    fmax = float(fmt.max)
    limit = fmax + float(fmt.eps) * 2.0 ** fmt.emax / 2
    counts: dict[str, int] = {}
    examples: dict[str, str] = {}
    overflow_seen: dict[str, int] = {}
    overflow_failing = 0
    phrases: list[str] = []
    # 1. calls whose status was wrong (raise declared and values returned, or the reverse)
    for rec in records:
        f = rec.get("finding")
        if not f:
            continue
        where = _placed_text(rec["placed"], 2)
        if f == "returned":
            key, text = "returned", (f"declared nan=raise, but the kernel returned a result "
                                     f"for an input with {where}")
        elif f == "raised":
            key, text = "raised", (f"declared nan={policy}, but the kernel raised on an input "
                                   f"with {where} ({rec['error']})")
        else:
            key, text = f, f"the kernel {'crashed' if f == 'crashed' else 'hung'} on an input with {where}"
        counts[key] = counts.get(key, 0) + 1
        examples.setdefault(key, text)
    # 2. element positions
    first_idx = None
    for rec in records:
        cmp: Optional[Comparison] = rec.get("cmp")
        if cmp is None:
            continue
        out, ref = cmp.out, cmp.ref
        exp = np.asarray(cmp.env.get("expected", ref), dtype=np.float64)
        exp = np.broadcast_to(exp, out.shape)
        with np.errstate(invalid="ignore"):
            over = np.isfinite(ref) & (np.abs(ref) >= limit)
        if np.any(over):
            ocls = _overflow_class(out, ref, fmax)
            for c in ocls[over]:
                overflow_seen[c] = overflow_seen.get(c, 0) + 1
            overflow_failing += int(np.count_nonzero(over & ~cmp.ok))
        bad = ~cmp.ok & ~over
        if not np.any(bad):
            continue
        ec, oc = value_class(exp), value_class(out)
        cats = np.full(out.shape, "", dtype=object)
        cats[(ec == "nan") & (oc == "finite")] = "nan-swallowed"
        cats[np.isin(ec, ["+inf", "-inf"]) & (oc == "finite")] = "inf-swallowed"
        cats[(ec == "nan") & np.isin(oc, ["+inf", "-inf"])] = "inf-for-nan"
        cats[np.isin(ec, ["+inf", "-inf"]) & (oc == "nan")] = "nan-for-inf"
        cats[((ec == "+inf") & (oc == "-inf")) | ((ec == "-inf") & (oc == "+inf"))] = "wrong-sign-inf"
        cats[(ec == "finite") & (oc == "nan")] = "spurious-nan"
        cats[(ec == "finite") & np.isin(oc, ["+inf", "-inf"])] = "spurious-inf"
        cats[(ec == "finite") & (oc == "finite")] = "value"
        for cat in _CATEGORY_TEXT:
            m = bad & (cats == cat)
            n = int(np.count_nonzero(m))
            if not n:
                continue
            counts[cat] = counts.get(cat, 0) + n
            if cat in examples:
                continue
            idx = tuple(int(i) for i in np.argwhere(m)[0])
            if first_idx is None:
                first_idx = idx
            src = _sources(ctx.op, rec["placed"], idx)
            srctext = (f"input {_placed_text(src, 2)}" if src else
                       "no non-finite input" if not rec["placed"] else
                       f"no non-finite input reaches it (injected: {_placed_text(rec['placed'], 2)})")
            probe = rec["case"].extra.get("probe")
            what = (f"{srctext}; {_at(idx)} = {_fmt_value(out[idx])} where the oracle gives "
                    f"{_fmt_value(exp[idx])}")
            if cat in ("nan-swallowed", "inf-swallowed"):
                what += f" ({_replacement(ctx, rec, m)})"
            if cat in ("spurious-nan", "spurious-inf", "value") and probe in ("overflow", "finite"):
                what += f" [{rec['case'].family} inputs]"
            examples[cat] = what
    # 3. the headline
    sig: dict[str, Any] = {"declared": f"nan={policy}, overflow={ctx.claims.overflow}",
                           "counts": counts}
    code = None
    narrow = _narrow_overflow(ctx, records) if set(counts) & {"spurious-inf", "spurious-nan"} \
        else None
    if narrow is not None:
        # Inf/NaN exactly where the op with operands in a narrower format overflows: a
        # format substitution that only large inputs show (C-PRC-04's cause)
        g = get_format(narrow)
        sig["operand_format"] = narrow
        code = "narrow-overflow"
        phrases.insert(0, f"every spurious Inf/NaN is where the op with operands rounded to "
                       f"{g.short or narrow} overflows (largest finite {g.max:g}): the kernel "
                       f"computes in {g.short or narrow} for these inputs")
    for key in ("returned", "raised", "crashed", "timeout"):
        if key in examples:
            phrases.append(examples[key])
    for cat, text in _CATEGORY_TEXT.items():
        if cat in examples:
            phrases.append(f"{text}: {examples[cat]}" + (
                f" ({counts[cat]} outputs)" if counts[cat] > 1 else ""))
    if overflow_seen:
        total = sum(overflow_seen.values())
        seen = sorted(overflow_seen.items(), key=lambda kv: -kv[1])
        sig["overflow_declared"] = ctx.claims.overflow
        sig["overflow_observed"] = {k: v for k, v in seen}
        if overflow_failing:
            obs = ", ".join(f"{_OVERFLOW_WORDS[k]} at {v} of {total}" for k, v in seen)
            phrases.insert(0, f"overflow: declared {ctx.claims.overflow}, observed {obs} "
                              f"results beyond the {fmt.name} range")
    kind = next((k for k in ("returned", "raised", "crashed", "timeout") if k in counts), None)
    if kind is None and overflow_failing:
        kind = "overflow"
    if kind is None:
        kind = next((c for c in _CATEGORY_TEXT if c in counts), "value")
    sig["kind"] = kind
    if first_idx is not None:
        sig["index"] = list(first_idx)
    return Diagnosis(summary="; ".join(phrases) if phrases else ctx.contract.signature.summary,
                     quantities=sig, code=code)


def _narrow_overflow(ctx: Context, records) -> Optional[str]:
    """The narrower format (float16, bfloat16) with operands rounded to which the op's
    emulation is non-finite at every spurious Inf/NaN of every call that has one (and no
    non-finite input), or None."""
    dt = get_format(ctx.dtype)
    spurious = []
    for rec in records:
        cmp = rec.get("cmp")
        if cmp is None or rec.get("placed") or rec.get("inputs") is None:
            continue
        with np.errstate(invalid="ignore"):
            m = ~cmp.ok & ~np.isfinite(cmp.out) & np.isfinite(cmp.ref)
        if np.any(m):
            spurious.append((rec, m))
    if not spurious:
        return None
    kw = ctx.kwargs()
    for name in ("float16", "bfloat16"):
        g = get_format(name)
        if g.max >= dt.max:
            continue
        for rec, m in spurious:
            x = {k: np.asarray(v, dtype=np.float64) if np.asarray(v).dtype.kind == "f"
                 else np.asarray(v) for k, v in rec["inputs"].items()}
            try:
                emus = ctx.op.emulations(x, name, **kw)
            except Exception:
                emus = []
            if not any(np.shape(e) == m.shape and bool(np.all(~np.isfinite(np.asarray(
                    e, dtype=np.float64))[m])) for _, e in emus):
                break
        else:
            return name
    return None


# -- C-EXC-02: out-of-range indices -----------------------------------------------------------

BELOW = "below"
ABOVE = "above"


def oob_values(V: int) -> list[tuple[str, int]]:
    """(side, index) probes: below 0 and at or above V."""
    return [(BELOW, -1), (BELOW, -V), (BELOW, -V - 1), (BELOW, -(2 ** 31)),
            (ABOVE, V), (ABOVE, V + 1), (ABOVE, 2 ** 31 - 1)]


def classify_rows(table: np.ndarray, indices: np.ndarray, out) -> set:
    """The policies (clamp, zero, wrap) a returned result is consistent with, bit for
    bit; {"garbage"} when none (in-range rows wrong, values no policy gives, bad shape)."""
    if out is None:
        return {"garbage"}
    out = np.asarray(out)
    if out.shape != (indices.shape[0], table.shape[1]):
        return {"garbage"}
    got = out.astype(np.float64)
    tab = table.astype(np.float64)
    match = set()
    for pol in ("clamp", "zero", "wrap"):
        want = expected_rows(tab, indices, pol)
        if np.all((got == want) & (np.signbit(got) == np.signbit(want))
                  | (np.isnan(got) & np.isnan(want))):
            match.add(pol)
    if not match and _nan_filled(tab, indices, got):
        match.add("fill")
    return match or {"garbage"}


def _nan_filled(tab: np.ndarray, indices: np.ndarray, got: np.ndarray) -> bool:
    """Out-of-range rows filled with NaN, in-range rows (python-style negatives included)
    right: a deterministic fill, not garbage."""
    V = tab.shape[0]
    inside = (indices >= -V) & (indices < V)
    want = tab[np.where(inside, indices, 0) % V]
    return bool(np.all(np.isnan(got[~inside])) and np.all(got[inside] == want[inside])
                and (~inside).any())


def _side_text(side: str, V: int) -> str:
    return "negative indices" if side == BELOW else "indices >= V"


def describe_side(obs: list[tuple[int, set]], side: str, V: int) -> str:
    """One phrase for a side: "clamp", or "wrap for -V <= i < 0 (python-style), raise below"."""
    order = ("raise", "clamp", "wrap", "zero", "fill", "crash", "hang", "garbage")
    common = set.intersection(*[set(s) for _, s in obs]) if obs else set()
    for pol in order:
        if pol in common:
            return _label_text(pol)
    if side == BELOW:
        if all(("wrap" in s) for i, s in obs if i >= -V):
            below = [set(s) for i, s in obs if i < -V]
            rest = set.intersection(*below) if below else set()
            lab = next((p for p in order if p in rest), None)
            if lab == "raise":
                return "wrap for -V <= i < 0, raise below -V (python-style)"
            if lab is not None:
                return f"wrap for -V <= i < 0, {_label_text(lab)} below -V"
    # an index two policies explain alike (-V: clamp and wrap both give row 0) gets the
    # label the side's other indices share
    seen = {p: sum(p in s for _, s in obs) for p in order}
    parts = []
    for i, s in obs:
        lab = max((p for p in order if p in s), key=lambda p: (seen[p], -order.index(p)),
                  default="garbage")
        parts.append(f"{_label_text(lab)} at {i}")
    return "mixed: " + ", ".join(parts)


def _label_text(label: str) -> str:
    return "fill (NaN)" if label == "fill" else label


def oob_conforms(declared: str, labels: set) -> bool:
    if declared == "undefined":
        return not (labels & {"crash", "hang"})
    return declared in labels


@protocol("oob", oracles=("policy",), params={"positions": (int, 2)}, provides=("free",),
          description="embedding calls with out-of-range indices (-1, -V, -V-1, -2**31; V, "
                      "V+1, 2**31-1), one value per call mixed with in-range indices, and an "
                      "in-range control call; each call's behaviour (raise, clamp, zero, wrap, "
                      "garbage, crash, hang) against the declared oob policy")
def oob(ctx: Context):
    t0 = time.perf_counter()
    if ctx.op.index_policy is not None:
        # an op that states its own out-of-range semantics (bound, with_index, expected)
        # rather than gathering rows of a table
        return _oob_by_capability(ctx, ctx.op.index_policy, t0)
    g = ctx.op.gather
    if g is None:
        return lacking(ctx, Lacks("gather", "the op gathers no rows by index"))
    policy = ctx.claims.oob
    positions = int(ctx.param("positions", 2))
    shape = ctx.shapes()[0]
    family = ctx.protocol.families[0]
    base = ctx.inputs(shape, family, 0)
    table = base[g.table]
    V = int(table.shape[0])
    count = int(shape[g.count])
    case0 = ctx.case(shape, family, 0, probe="in-range")
    out = ctx.run(base, case0)
    ref0, x0 = ctx.reference(base)
    comps = [ctx.evaluate(case0, base, out, ref0, x=x0,
                          extra={"free": np.zeros_like(ref0)})]
    observations: list[dict] = []
    rng = ctx.rng("oob")
    for side, value in oob_values(V):
        idx = rng.integers(0, V, count).astype(np.int64)
        pos = rng.choice(count, size=min(positions, count), replace=False)
        idx[pos] = value
        inputs = dict(base)
        inputs[g.table], inputs[g.indices] = table, idx
        case = ctx.case(shape, family, 0, probe=f"index {value}")
        res = ctx.call(inputs)
        if res.status == "raised":
            labels = {"raise"}
        elif res.status == "crashed":
            labels = {"crash"}
        elif res.status == "timeout":
            labels = {"hang"}
        elif res.status == "bad-output":
            labels = {"garbage"}
        else:
            ctx.check_flags(res, case)
            labels = classify_rows(table, idx, res.out)
        ok = oob_conforms(policy, labels)
        cmp = None
        if res.ok and policy != "raise":
            got = np.asarray(res.out)
            if got.shape == (count, table.shape[1]):
                want = expected_rows(table.astype(np.float64), idx,
                                     "undefined" if policy == "undefined" else policy)
                free = np.zeros_like(want)
                if policy == "undefined":
                    free[:] = 1.0
                cmp = ctx.evaluate(case, inputs, got.astype(np.float64), want,
                                   extra={"free": free})
                comps.append(cmp)
                ok = ok and cmp.passed
        observations.append({"side": side, "index": value, "labels": sorted(labels),
                             "status": res.status, "error": res.describe() if not res.ok else "",
                             "ok": bool(ok), "case": case, "cmp": cmp})
    return _oob_verdict(ctx, observations, comps, V, case0, t0)


def _failure_labels(res) -> Optional[set]:
    """The behaviour of a call that returned nothing usable, or None if it returned."""
    return {"raised": {"raise"}, "crashed": {"crash"}, "timeout": {"hang"},
            "bad-output": {"garbage"}}.get(res.status)


def _oob_by_capability(ctx: Context, cap, t0: float):
    """``oob`` for an op with an ``index_policy``: ``cap.bound(inputs)`` is the size V the
    indices must stay below, ``cap.with_index(inputs, value, positions, rng)`` the inputs
    with that out-of-range value at a few positions, ``cap.expected(inputs, policy)`` the
    float64 reference under clamp, zero or wrap.  A returned result is classified by the
    policies whose reference it meets within the contract's tolerance."""
    from ..check.engine import KernelFailure
    policy = ctx.claims.oob
    positions = int(ctx.param("positions", 2))
    shape = ctx.shapes()[0]
    family = ctx.protocol.families[0]
    base = ctx.inputs(shape, family, 0)
    V = int(cap.bound(base))
    case0 = ctx.case(shape, family, 0, probe="in-range")
    out = ctx.run(base, case0)
    ref0, x0 = ctx.reference(base)
    comps = [ctx.evaluate(case0, base, out, ref0, x=x0, extra={"free": np.zeros_like(ref0)})]
    observations: list[dict] = []
    rng = ctx.rng("oob")
    for side, value in oob_values(V):
        inputs = cap.with_index(base, value, positions, rng)
        case = ctx.case(shape, family, 0, probe=f"index {value}")
        res = ctx.call(inputs)
        labels, cmp = _failure_labels(res), None
        if labels is None:
            ctx.check_flags(res, case)
            try:
                got = ctx.validate(res, case, inputs)
            except KernelFailure:  # a wrong shape or dtype: no policy gives it
                got = None
            by_policy = {}
            if got is not None:
                x = upcast(inputs)
                for pol in ("clamp", "zero", "wrap"):
                    want = np.asarray(cap.expected(inputs, pol), dtype=np.float64)
                    by_policy[pol] = ctx.evaluate(case, inputs, got, want, x=x,
                                                  extra={"free": np.zeros_like(want)})
            labels = {p for p, c in by_policy.items() if c.passed} or {"garbage"}
            cmp = by_policy.get(policy)
            if cmp is not None:
                comps.append(cmp)
        observations.append({"side": side, "index": value, "labels": sorted(labels),
                             "status": res.status, "error": res.describe() if not res.ok else "",
                             "ok": bool(oob_conforms(policy, labels)), "case": case, "cmp": cmp})
    return _oob_verdict(ctx, observations, comps, V, case0, t0)


def _oob_verdict(ctx: Context, observations: list, comps: list, V: int, case0, t0: float):
    """Pass, or a violation naming the behaviour observed on each side."""
    policy = ctx.claims.oob
    failing = [o for o in observations if not o["ok"]]
    control_bad = not comps[0].passed
    details = {"declared": policy, "V": V,
               "calls": [{"index": o["index"], "side": o["side"], "observed": o["labels"],
                          "conforms": o["ok"]} for o in observations]}
    if not failing and not control_bad:
        return ctx.passed(f"oob={policy}: all {len(observations)} out-of-range calls conform",
                          details=details, seconds=time.perf_counter() - t0)
    diag = ctx.run_detector({"observations": observations, "V": V, "policy": policy,
                            "control": comps[0]})
    sig = dict(diag.quantities)
    headline = diag.summary or ctx.contract.signature.summary
    bad_cmp = next((o["cmp"] for o in failing if o["cmp"] is not None and not o["cmp"].passed),
                   comps[0] if control_bad else None)
    case = failing[0]["case"] if failing else case0
    v = ctx.violation(bad_cmp, message=headline, quantities=sig, case=case)
    return ctx.violated(v, signature=sig, details=details, seconds=time.perf_counter() - t0)


@detector("oob_behaviour",
          "the behaviour observed for indices below 0 and at or above V against the declared "
          "policy, per index")
def oob_behaviour(ctx: Context, evidence) -> Diagnosis:
    obs = list(evidence.get("observations") or [])
    V = int(evidence.get("V", 0))
    policy = evidence.get("policy", ctx.claims.oob)
    per_index = {str(o["index"]): "/".join(o["labels"]) for o in obs}
    sides = {}
    for side in (BELOW, ABOVE):
        items = [(o["index"], set(o["labels"])) for o in obs if o["side"] == side]
        sides[side] = describe_side(items, side, V)
    wrong = [side for side in (BELOW, ABOVE)
             if any(not o["ok"] for o in obs if o["side"] == side)]
    parts = []
    for side in wrong or (BELOW, ABOVE):
        parts.append(f"{sides[side]} on {_side_text(side, V)}")
    control = evidence.get("control")
    summary = f"declared {policy}, observed " + "; ".join(parts)
    if control is not None and not control.passed:
        summary += "; in-range indices give wrong rows"
    return Diagnosis(summary=summary, quantities={
        "declared": policy, "below": sides[BELOW], "above": sides[ABOVE],
        "per_index": per_index, "V": V})
