"""The precision family (C-PRC-01..04): protocols and signature detectors.

Protocols
    ``subnormal_probe``  (C-PRC-03) crafted inputs per op: subnormal inputs whose
                         results are normal where the op allows it ("inputs"), and
                         normal inputs whose results are subnormal ("outputs").
    ``conversion_probe`` (C-PRC-04, cast) the families plus exact ties and values at
                         the target's overflow threshold, where rounding modes differ.

Detectors
    ``precision_fingerprint``  (C-PRC-01, C-PRC-04) the recipe the kernel ran:
                               operand format x accumulator format and effective
                               accumulator bits (matmul, sum: crafted probes, see
                               :mod:`.fingerprint`); for other ops, the operand
                               format whose emulation explains the error and the
                               accumulator precision the error corresponds to.  Where
                               the op names a recovery target, also the recipe the
                               staged recovery of :mod:`kcontract.fingerprint` finds
                               (``recovered_recipe``: accumulator bits and rounding,
                               fused group, promotion, workspace, subnormals, with
                               confidence), run on the kernel through the check's calls.
    ``unstable_formulation``   (C-PRC-02) pass rate per input family and the
                               formulation that fails that way.
    ``subnormal_flush``        (C-PRC-03) where subnormals were flushed, with counts.
    ``rounding_mode``          (C-PRC-04, cast) which rounding mode the conversion used.
"""
from __future__ import annotations

import math
import time
from collections import OrderedDict
from typing import Optional

import numpy as np

from ..check.engine import Comparison, Context
from ..check.verdict import Diagnosis
from ..errors import UsageError
from ..formats import get_format, is_subnormal
from ..language.registry import detector, protocol
from ..ops import FAMILY_DESCRIPTIONS
from ..ops.base import Lacks
from .common import compare_cases, lacking, verdict_from
from .fingerprint import (fingerprint_attention, fingerprint_matmul, fingerprint_sum,
                          identify_rounding, nearest_accumulator, short)

#: the fingerprint probes by the computation they probe (an op's ``fingerprint.kind``)
FINGERPRINT_PROBES = {"inner_product": fingerprint_matmul, "row_sum": fingerprint_sum,
                      "attention_pv": fingerprint_attention}


# -- helpers --------------------------------------------------------------------------------

def _caller(ctx: Context, strict: bool = False):
    """``call(*arrays)`` -> the kernel's output as an array, or None when it fails;
    ``strict``: a failed call (or an integrity flag) raises
    :class:`~kcontract.fingerprint.ProbeFailure` instead, as the recovery's calls do."""
    from ..fingerprint.targets import probe_output

    def call(*arrays):
        res = ctx.call(dict(zip(ctx.op.inputs, arrays)))
        if strict:
            return probe_output(res)
        if not res.ok or res.out is None:
            return None
        return np.asarray(res.out)
    return call


def _comparisons(evidence) -> list[Comparison]:
    return list(evidence.get("comparisons") or [])


def _narrower(fmt_a: str, fmt_b: str) -> bool:
    """fmt_a holds fewer significand bits or less range than fmt_b."""
    a, b = get_format(fmt_a), get_format(fmt_b)
    return a.precision < b.precision or a.max < b.max


def _gross_share(comps: list[Comparison]) -> float:
    """Share of the failing elements whose error is at least half the result itself:
    not rounding, but wrong or missing results."""
    bad = total = 0
    for c in comps:
        if c.passed:
            continue
        with np.errstate(invalid="ignore"):
            err = c.error()
            big = ~c.ok & ~(err < 0.5 * np.abs(c.ref))
        bad += int(np.count_nonzero(big))
        total += c.mismatched
    return bad / total if total else 0.0


#: a failing share of the output below this is too small for a working-precision fault
LOCALIZED_SHARE = 0.01


def _localized(comps: list[Comparison]) -> Optional[dict]:
    """The failing elements when they are a few positions of the last axis repeated across
    rows (a tail or boundary element computed wrongly), not an error spread over the output
    as a narrower accumulator's or format's is: {positions, rows, failing, total}, or None."""
    failing = total = 0
    cols: set = set()
    rows = 0
    far = True
    for c in comps:
        if c.passed:
            continue
        ok = np.asarray(c.ok, dtype=bool)
        if ok.ndim < 2 or ok.shape[-1] < 8:
            return None
        bad = ~ok
        n = int(np.count_nonzero(bad))
        failing += n
        total += ok.size
        if n > LOCALIZED_SHARE * ok.size:
            return None
        flat = bad.reshape(-1, ok.shape[-1])
        cols.update(int(j) - ok.shape[-1] for j in np.flatnonzero(flat.any(axis=0)))
        rows += int(np.count_nonzero(flat.any(axis=1)))
        if c.tol is not None:
            # far beyond the tolerance, not a marginal excess that a slightly narrower
            # accumulator leaves at the end of a long running sum
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.asarray(c.error(), np.float64)[bad] / np.broadcast_to(
                    np.asarray(c.tol, np.float64), ok.shape)[bad]
            far = far and float(np.nanmedian(r)) >= 8.0
    if not failing or rows < 4 or len(cols) > 2:
        return None
    return {"positions": sorted(cols), "rows": rows, "failing": failing, "total": total,
            "far": far}


def _required_precision(ctx: Context, comps: list[Comparison]) -> Optional[float]:
    """The accumulator precision (bits) the observed error corresponds to: the
    tolerance scales like u, so a kernel that needs the tolerance multiplied by r
    behaves like an accumulator with u * r, i.e. log2(r) fewer bits."""
    ratios = []
    for c in comps:
        if c.tol is None:
            continue
        err = c.error()
        tol = np.broadcast_to(c.tol, err.shape)
        ok = np.isfinite(err) & np.isfinite(tol) & (tol > 0)
        if ok.any():
            ratios.append(float(np.max(err[ok] / tol[ok])))
    if not ratios:
        return None
    r = max(ratios)
    if r <= 1:
        return float(ctx.claims.accumulate.precision)
    return float(ctx.claims.accumulate.precision) - math.log2(r)


def dec_bits_declared(ctx: Context) -> int:
    return int(ctx.claims.accumulate.precision)


def _substitution(ctx: Context, comps: list[Comparison]) -> Optional[dict]:
    """Which narrower operand format's emulation explains the kernel's error (the op's
    ``emulations`` capability): the residual |out - emulation| as a share of
    |out - oracle|."""
    dtype = ctx.dtype.name
    cands = [f for f in ("tfloat32", "float16", "bfloat16") if _narrower(f, dtype)]
    if not cands or not comps:
        return None
    kw = ctx.kwargs()
    best = None
    for c in comps[:2]:
        x = {k: v for k, v in c.env.items() if k in ctx.op.inputs}
        err = c.out - c.ref
        fin = np.isfinite(err)
        base = float(np.sqrt(np.mean(err[fin] ** 2))) if fin.any() else 0.0
        if base == 0.0:
            continue
        for f in cands:
            for label, emul in ctx.op.emulations(x, f, **kw):
                with np.errstate(all="ignore"):
                    d = c.out - emul
                ok = fin & np.isfinite(d)
                if not ok.any():
                    continue
                resid = float(np.sqrt(np.mean(d[ok] ** 2))) / base
                if best is None or resid < best["residual"]:
                    best = {"format": f, "what": label, "residual": resid}
    return best


def _fingerprint(ctx: Context, dtype: str):
    """The op's fingerprint probe (its ``fingerprint`` capability) run on the kernel, or
    None when the op declares none."""
    probe = ctx.op.fingerprint
    if probe is None or not probe.kind:
        return None
    fn = FINGERPRINT_PROBES.get(probe.kind)
    if fn is None:
        raise UsageError(f"op {ctx.op.name!r} names the fingerprint probe {probe.kind!r}; "
                         f"known: {', '.join(FINGERPRINT_PROBES)}")
    call = _caller(ctx)
    if probe.adapt is not None:
        call = probe.adapt(call)
    return fn(call, dtype, **dict(probe.options))


def _recover(ctx: Context, dtype: str):
    """The staged recovery of :mod:`kcontract.fingerprint` (the op's ``fingerprint.recipe``
    target) run on the kernel through the check's own calls (its worker): the Recipe,
    a string saying why there is none, or None when the op has no target.  The recovery is
    deterministic: one check run does it once per (op, target, format, keywords), however
    many of its contracts fail (C-PRC-01 and C-PRC-04 on one kernel)."""
    probe = ctx.op.fingerprint
    if probe is None or not probe.recipe:
        return None
    key = ("recover", ctx.op.name, probe.recipe, dtype,
           repr(sorted(ctx.kwargs().items())))
    if key not in ctx.memo:
        ctx.memo[key] = _run_recovery(ctx, probe, dtype)
    return ctx.memo[key]


def _run_recovery(ctx: Context, probe, dtype: str):
    from ..fingerprint import ProbeFailure, recover, target_for
    call = _caller(ctx, strict=True)
    if probe.recipe_adapt is not None:
        call = probe.recipe_adapt(call)
    # the recovery's calls count among the contract's kernel calls, as the fixed-list
    # probe's do (the recipe's own ``calls`` says how many were the recovery's)
    try:
        return recover(target_for(probe.recipe, call, dtype), probe.recipe)
    except ProbeFailure as exc:
        return f"the kernel failed on a recovery probe: {exc}"
    except (ValueError, TypeError, IndexError, FloatingPointError) as exc:
        # outputs the probes' read-back cannot use (a shape, a dtype): the violation stands
        return f"the recovery could not read the kernel's outputs: {type(exc).__name__}: {exc}"


def recipe_quantities(recipe) -> dict:
    """The recovered recipe as a violation states it: each field's value and confidence,
    the summary, the evidence and the error sweep (for the report's plot)."""
    from ..fingerprint.recover import STATED_FIELDS
    d = recipe.as_dict()
    fields = d["recipe"]
    out = {"summary": d["summary"]}
    for name in STATED_FIELDS:
        if name in fields:
            f = fields[name]
            out[name] = f["value"]
            out[f"{name}_confidence"] = f["confidence"]
    out.update({"evidence": {k: v["evidence"] for k, v in fields.items()},
                "probes_reproduced": d["probes_reproduced"], "sweep": d["sweep"],
                "calls": d["calls"], "seconds": d["seconds"],
                "input_format": d["input_format"], "output_format": d["output_format"]})
    return out


# -- precision fingerprint (C-PRC-01 / C-PRC-04) ---------------------------------------------

@detector("precision_fingerprint",
          "the recipe the kernel ran: operand format x accumulator format, effective "
          "accumulator bits (the op's order-independent fingerprint probe where it declares "
          "one: inner products, row sums, the probabilities' product with v; the op's "
          "narrowed-operand emulations and the error-equivalent bits otherwise)")
def precision_fingerprint(ctx: Context, evidence) -> Diagnosis:
    comps = _comparisons(evidence)
    cls = ctx.contract.cls
    dtype = ctx.dtype.name
    declared = ctx.claims.accumulate.name
    out: dict = {"declared_accumulator": declared, "declared_operands": dtype}
    req = _required_precision(ctx, [c for c in comps if not c.passed])
    if req is not None:
        req = round(req, 1)
        out["error_equivalent_bits"] = req
    gross = _gross_share(comps)
    fp = None
    if gross >= 0.5:
        pass  # wrong results, not rounding: no recipe to fingerprint
    else:
        fp = _fingerprint(ctx, dtype)
    if fp is not None:
        if fp.accumulator_bits is None and req is not None and fp.confidence >= 0.9:
            fp.accumulator_bits = req if req < ctx.claims.accumulate.precision else None
        out.update(fp.as_dict())
        operand, acc, bits = fp.operand_format, fp.accumulator_format, fp.accumulator_bits
        if (not ctx.op.fingerprint.covers_operands and gross < 0.5
                and not (operand and _narrower(operand, dtype))
                and (cls == "C-PRC-04" or fp.confidence < 0.9)):
            # the probe cannot see every operand (attention's p @ v: not q and k): an
            # emulation can
            sub = _substitution(ctx, [c for c in comps if not c.passed])
            if sub is not None:
                out["substitution"] = {k: (round(v, 3) if isinstance(v, float) else v)
                                       for k, v in sub.items()}
                if sub["residual"] < 0.5:
                    operand = sub["format"]
                    out["recipe"] = (f"{sub['what']} rounded to {short(operand)} "
                                     f"(the emulation leaves {sub['residual']:.0%} of the error)")
                    out["operand_format"] = operand
    else:
        sub = None if gross >= 0.5 else _substitution(ctx, [c for c in comps if not c.passed])
        operand, acc, bits = dtype, None, None
        if sub is not None:
            out["substitution"] = {k: (round(v, 3) if isinstance(v, float) else v)
                                   for k, v in sub.items()}
        if sub is not None and sub["residual"] < 0.5:
            operand = sub["format"]
            acc = declared
            out["recipe"] = (f"{sub['what']} rounded to {short(operand)} "
                             f"(the emulation leaves {sub['residual']:.0%} of the error)")
        elif req is not None:
            bits = round(req, 1)
            acc = nearest_accumulator(req)
            if acc == "float32" and req < dec_bits_declared(ctx) - 2:
                out["recipe"] = (f"error of a ~{bits:g}-bit accumulator (between fp16 and fp32: "
                                 "a wide first stage with narrower partials?)")
                acc = None
            else:
                out["recipe"] = f"error of a ~{bits:g}-bit accumulator ({short(acc)}-like)"
        out.update({"operand_format": operand, "accumulator_format": acc,
                    "accumulator_bits": bits})
    recovered = None if gross >= 0.5 else _recover(ctx, dtype)
    if isinstance(recovered, str):
        out["recovered_recipe"] = {"summary": None, "error": recovered}
        recovered = None
    elif recovered is not None:
        out["recovered_recipe"] = recipe_quantities(recovered)
    recipe = out.get("recipe", "")
    refined = None
    dec_bits = ctx.claims.accumulate.precision
    narrow_acc = acc is not None and _narrower(acc, declared)
    narrow_op = operand is not None and _narrower(operand, dtype)
    bits_txt = f" (~{bits:g} effective bits)" if bits is not None else ""
    unexplained = fp is not None and fp.confidence < 0.9
    local = _localized(comps)
    if local is not None and not local["far"]:
        out["localized"] = local  # where it fails, for the diagnosis; not decisive alone
        local = None
    if local is not None:
        pos = " and ".join("the last position" if j == -1 else f"position {-j} from the end"
                           for j in sorted(local["positions"], reverse=True))
        out["localized"] = local
        refined = "localized-error"
        summary = (f"{local['failing']} of {local['total']} elements fail, all at {pos} of "
                   f"the last axis ({local['rows']} rows): a tail or boundary element "
                   f"computed wrongly, not a narrower working precision (which errs across "
                   f"the whole output)")
    elif gross >= 0.5:
        summary = ("the error is as large as the results themselves: no rounding recipe "
                   "explains it (wrong or incomplete results)")
    elif unexplained:
        summary = f"{recipe}" + (f"; the error corresponds to a ~{req:g}-bit accumulator"
                                 if req is not None else "")
    elif cls == "C-PRC-04" and narrow_op:
        summary = (f"operands rounded to {short(operand)} before the product, not kept in "
                   f"{short(dtype)}: {recipe}")
    elif narrow_acc:
        verb = "intermediates rounded to" if cls == "C-PRC-04" else "accumulates like"
        summary = (f"{verb} {short(acc)}{bits_txt}, not the declared {short(declared)} "
                   f"accumulator: {recipe}")
    elif narrow_op:
        summary = (f"the accumulator is {short(declared)} as declared, but the kernel ran "
                   f"{recipe}: an undeclared operand substitution (C-PRC-04) costs the "
                   f"precision")
        if cls == "C-PRC-01":
            refined = "operand-substitution"
    elif fp is None and req is not None and req < dec_bits - 2:
        summary = (f"the error corresponds to a ~{req:g}-bit accumulator, narrower than "
                   f"the declared {short(declared)} ({dec_bits} bits): partial results are "
                   f"kept in a narrower format somewhere")
    else:
        summary = (f"error above the {short(declared)}-accumulation bound; "
                   f"fingerprint: {recipe or 'not identified'}")
        if acc is not None and not _narrower(acc, declared) and operand in (None, dtype):
            summary += (f": the accumulation itself is {short(declared)}-like, so the error "
                        f"is systematic (another formula, a dropped or added term), not "
                        f"rounding")
    if recovered is not None:
        summary = (f"recovered recipe: {recovered.summary()}; {summary}" if unexplained else
                   f"{summary}; recovered recipe: {recovered.summary()}")
    return Diagnosis(summary=summary, quantities=out, code=refined)


# -- C-PRC-02: unstable formulations ---------------------------------------------------------

def _family_table(comps: list[Comparison]) -> "OrderedDict[str, list]":
    fams: "OrderedDict[str, list]" = OrderedDict()
    for c in comps:
        row = fams.setdefault(c.case.family, [0, 0])
        row[0] += int(c.passed)
        row[1] += 1
    return fams


def _describe_family(name: str) -> str:
    d = FAMILY_DESCRIPTIONS.get(name, "")
    return f"'{name}' ({d})" if d else f"'{name}'"


#: the conditioning fit: a level counts when its error is this many times the floor (the
#: error at the best-conditioned level), and is below this share of the result (saturated:
#: the variance, say, is garbage and no longer grows); at least this many levels, spanning
#: at least this factor in the condition number
GROWTH_FLOOR_FACTOR = 4.0
GROWTH_SATURATION = 0.25
GROWTH_MIN_POINTS = 3
GROWTH_MIN_SPAN = 8.0


def conditioning_growth(ctx: Context, name: str) -> Optional[dict]:
    """How the kernel's error grows with the op's condition number ``name``, fitted across
    cases: the op's :meth:`conditioning_sweep` (the same rows at a growing conditioning;
    layernorm: N(0, 1) plus offsets 1 to 2^14) is run, each level's error measured as the
    median over rows of the row's largest |out - ref| / mag, and the slope of
    log(error - floor) against log(kappa) fitted by least squares over the levels where the
    error stands above its floor and below saturation.  Returns ``exponent`` (None when the
    evidence is not decisive, ``reason`` says why), the kappa range and the levels; None
    when the op has no sweep."""
    from ..check.engine import KernelFailure
    shape = ctx.shapes()[0]
    rng = ctx.rng(ctx.op.describe_shape(shape), "conditioning-sweep")
    sweep = ctx.op.conditioning_sweep(shape, ctx.dtype, rng)
    if not sweep or isinstance(sweep, Lacks):
        return None
    kw = ctx.kwargs()
    levels = []  # (offset, kappa, error)
    for offset, inputs in sweep:
        case = ctx.case(shape, "conditioning-sweep", 0, offset=offset)
        try:
            out = ctx.run(inputs, case)
        except KernelFailure:
            levels.append((offset, None, math.inf))
            continue
        ref, x = ctx.reference(inputs)
        with np.errstate(all="ignore"):
            q = ctx.op.quantities(x, ref, **kw)
            err = np.abs(np.asarray(out, dtype=np.float64) - ref)
            rel = err / np.broadcast_to(q["mag"], err.shape)
            kap = np.broadcast_to(q[name], err.shape)
        rows = rel.reshape(rel.shape[0], -1) if rel.ndim > 1 else rel.reshape(1, -1)
        worst = np.where(np.isfinite(rows), rows, np.inf).max(axis=1)
        levels.append((offset, float(np.median(kap)), float(np.median(worst))))
    fin = [(o, k, e) for o, k, e in levels if k is not None]
    out = {"levels": [[round(k, 3), float(f"{e:.3g}")] for _, k, e in fin], "exponent": None,
           "kappa_range": None, "points": 0, "reason": ""}
    if len(fin) < GROWTH_MIN_POINTS:
        out["reason"] = "the kernel failed at most conditioning levels"
        return out
    floor = fin[0][2]
    above = [(k, e) for _, k, e in fin
             if math.isfinite(e) and e > GROWTH_FLOOR_FACTOR * max(floor, 1e-300)]
    usable = [(k, e) for k, e in above if e < GROWTH_SATURATION]
    if not above:
        out["reason"] = (f"the error does not grow with {name} (it stays within "
                         f"{GROWTH_FLOOR_FACTOR:g}x of its value at {name} = {fin[0][1]:.3g} "
                         f"up to {name} = {fin[-1][1]:.3g})")
        return out
    if len(usable) < GROWTH_MIN_POINTS or usable[-1][0] / usable[0][0] < GROWTH_MIN_SPAN:
        first_sat = next((k for k, e in above if not e < GROWTH_SATURATION), None)
        out["reason"] = (f"too few levels between the error's floor and saturation "
                         f"({len(usable) or 'none'}"
                         + (f", spanning {name} {usable[0][0]:.3g} to {usable[-1][0]:.3g}"
                            if usable else "")
                         + (f"; the error reaches {GROWTH_SATURATION:g} of the result by "
                            f"{name} = {first_sat:.3g}" if first_sat is not None else "") + ")")
        return out
    lk = np.log([k for k, _ in usable])
    le = np.log([e - floor for _, e in usable])
    slope = float(np.polyfit(lk, le, 1)[0])
    out.update(exponent=slope, kappa_range=[round(usable[0][0], 3), round(usable[-1][0], 3)],
               points=len(usable))
    return out


@detector("unstable_formulation",
          "per input family pass rate and the unstable formulation that fails that way")
def unstable_formulation(ctx: Context, evidence) -> Diagnosis:
    comps = _comparisons(evidence)
    fams = _family_table(comps)
    failing = [f for f, (p, t) in fams.items() if p < t]
    passing = [f for f, (p, t) in fams.items() if p == t]
    bad = [c for c in comps if not c.passed]
    nonfinite = 0
    for c in bad:
        nonfinite += int(np.count_nonzero(~np.isfinite(c.out) & np.isfinite(c.ref)))
    extra: dict = {}
    expo = None
    cq = ctx.op.conditioning_quantity
    growth = conditioning_growth(ctx, cq) if cq and "offset" in failing else None
    if growth is not None:
        expo = growth["exponent"]
        extra[f"{cq}_growth"] = growth
        if expo is not None:
            extra[f"{cq}_exponent"] = round(expo, 2)
    suspected = ctx.op.unstable_formulation(failing, nonfinite, expo) or ""
    if growth is not None and expo is None and not nonfinite:
        # the fit is what names a formulation: without it, say so and why
        suspected = f"inconclusive: {growth['reason']}"
    if not suspected:
        suspected = ("inaccurate on every family: not a stability signature"
                     if not passing else "a formulation that is unstable on "
                     + ", ".join(repr(f) for f in failing))
    if growth is not None and expo is not None:
        extra["growth"] = ctx.op.conditioning_growth_kind(expo)
        lo, hi = growth["kappa_range"]
        suspected += f" (fitted over {cq} {lo:.3g} to {hi:.3g}, {growth['points']} levels)"
    rate = {f: f"{p}/{t}" for f, (p, t) in fams.items()}
    fail_txt = ", ".join(f"{_describe_family(f)} ({fams[f][0]} of {fams[f][1]} cases pass)"
                         for f in failing)
    pass_txt = ", ".join(f"'{f}'" for f in passing)
    summary = f"fails on family {fail_txt}"
    if passing:
        summary += f" while {pass_txt} pass{'es' if len(passing) == 1 else ''}"
    summary += f"; suspected: {suspected}"
    out = {"family_pass_rate": rate, "failing_families": failing, "passing_families": passing,
           "suspected_formulation": suspected, "nonfinite_outputs": nonfinite}
    out.update(extra)
    return Diagnosis(summary=summary, quantities=out)


# -- C-PRC-03: subnormals ----------------------------------------------------------------------

def _store(values, storage):
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return np.asarray(values, dtype=np.float64).astype(storage)


def _signs(rng, shape):
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0)


def subnormal_inputs(op, shape: dict, fmt, kind: str, rng):
    """The op's crafted subnormal probe (its ``subnormal_inputs`` capability): a dict of
    inputs, None when this probe says nothing at this format, or :class:`Lacks`."""
    return op.subnormal_inputs(shape, get_format(fmt), kind, rng)


@protocol("subnormal_probe", oracles=("fp64",),
          params={"probes": ((list, tuple), ("inputs", "outputs")), "kwargs": (dict, {})},
          description="crafted subnormal inputs (results normal where possible) and normal "
                      "inputs with subnormal results, per op")
def subnormal_probe(ctx: Context):
    t0 = time.perf_counter()
    comps = []
    for shape in ctx.shapes():
        for kind in ctx.param("probes"):
            for trial in range(ctx.protocol.trials):
                rng = ctx.rng(ctx.op.describe_shape(shape), "subnormal", kind, trial)
                inputs = subnormal_inputs(ctx.op, shape, ctx.dtype, kind, rng)
                if isinstance(inputs, Lacks):
                    return lacking(ctx, inputs)
                if inputs is None:
                    continue
                case = ctx.case(shape, f"subnormal-{kind}", trial)
                ref, x = ctx.reference(inputs)
                out = ctx.run(inputs, case)
                comps.append(ctx.evaluate(case, inputs, out, ref, x=x))
    if not comps:
        return ctx.skipped(f"no subnormal probe applies to {ctx.op.name} at {ctx.dtype.name}")
    return verdict_from(ctx, comps, t0)


@detector("subnormal_flush",
          "where subnormals were flushed to zero: the inputs (DAZ) or the outputs (FTZ), "
          "with counts")
def subnormal_flush(ctx: Context, evidence) -> Diagnosis:
    comps = _comparisons(evidence)
    out_fmt = ctx.op.output_format(ctx.dtype)
    kw = ctx.kwargs()
    ftz_total = ftz_flushed = ftz_fail = ftz_zero_fail = nonfinite = 0
    daz_fail = daz_match = daz_normal_zero = daz_normal_match = 0
    mid_fail = mid_zero = 0
    for c in comps:
        o, r = c.out, c.ref
        nonfinite += int(np.count_nonzero(~np.isfinite(o) & np.isfinite(r)))
        if c.case.family == "subnormal-outputs":
            subref = is_subnormal(r, out_fmt)
            ftz_total += int(np.count_nonzero(subref))
            ftz_flushed += int(np.count_nonzero(subref & (o == 0)))
            ftz_fail += int(np.count_nonzero(subref & ~c.ok))
            ftz_zero_fail += int(np.count_nonzero(subref & ~c.ok & (o == 0)))
        elif c.case.family == "subnormal-intermediates":
            # normal results made of subnormal intermediates (attention's probabilities):
            # a flush of those intermediates returns 0 where a normal number belongs
            failing = ~c.ok
            mid_fail += int(np.count_nonzero(failing))
            mid_zero += int(np.count_nonzero(failing & (o == 0) & (np.abs(r) >= out_fmt.tiny)))
        elif c.case.family == "subnormal-inputs":
            failing = ~c.ok
            x = {k: v for k, v in c.env.items() if k in ctx.op.inputs}
            zeroed = {}
            for k, v in x.items():
                storage = get_format(ctx.op.input_format(k, ctx.dtype))
                zeroed[k] = np.where(is_subnormal(v, storage), 0.0, v)
            with np.errstate(all="ignore"):
                daz_ref = ctx.op.oracle(zeroed, **kw)
            tol = np.broadcast_to(c.tol if c.tol is not None else 0.0, o.shape)
            with np.errstate(invalid="ignore"):
                match = np.abs(o - daz_ref) <= np.maximum(tol, 0.0)
            daz_fail += int(np.count_nonzero(failing))
            daz_match += int(np.count_nonzero(failing & match))
            daz_normal_zero += int(np.count_nonzero(failing & (np.abs(r) >= out_fmt.tiny)
                                                    & (o == 0)))
            # a normal result (not zero) that equals the zeroed-input oracle: no flush of a
            # subnormal *result* gives that (attention: q read as 0 makes the scores 0)
            with np.errstate(invalid="ignore"):
                daz_normal_match += int(np.count_nonzero(
                    failing & match & (np.abs(r) >= out_fmt.tiny) & (np.abs(o) >= out_fmt.tiny)))
    intermediates_flushed = mid_zero > 0 and mid_zero >= 0.5 * mid_fail
    # most subnormal results zero, or the failing ones zeros (a partial flush: a mode set on
    # one thread of a multi-threaded kernel flushes the rows that thread computes); only failing
    # zeros count (a subnormal below half the smallest one rounds to 0 honestly)
    ftz = ftz_zero_fail > 0 and (ftz_flushed >= 0.5 * ftz_total
                                 or ftz_zero_fail >= 0.9 * ftz_fail)
    outputs_flushed = ftz or intermediates_flushed
    inputs_flushed = (daz_normal_zero > 0 or daz_normal_match > 0) and daz_match >= 0.9 * daz_fail
    inputs_unclear = (not inputs_flushed) and daz_fail > 0 and daz_match >= 0.9 * daz_fail
    parts = []
    if inputs_flushed:
        what = (f"{daz_normal_zero} of them zeros where a normal number belongs"
                if daz_normal_zero else f"{daz_normal_match} of them normal numbers")
        parts.append(f"subnormal inputs treated as zero (DAZ): {daz_match} of {daz_fail} "
                     f"failing outputs equal the oracle with subnormal inputs zeroed, {what}")
    if ftz:
        rest = (f" (the other {ftz_total - ftz_flushed} kept: a partial flush)"
                if ftz_flushed < 0.5 * ftz_total else "")
        parts.append(f"subnormal outputs flushed to zero (FTZ): {ftz_flushed} of {ftz_total} "
                     f"subnormal results are 0{rest}")
    if intermediates_flushed:
        what = getattr(ctx.op, "subnormal_intermediates", None) or "intermediate results"
        parts.append(f"subnormal {what} flushed to zero (FTZ): {mid_zero} of {mid_fail} "
                     f"failing outputs are 0 where the oracle's normal result is made of "
                     f"subnormal {what}")
    if inputs_unclear and not outputs_flushed:
        parts.append(f"subnormal inputs or their subnormal results flushed to zero: "
                     f"{daz_match} of {daz_fail} failing outputs equal the oracle with "
                     f"subnormal inputs zeroed")
    if nonfinite:
        parts.append(f"{nonfinite} outputs are NaN/Inf where the oracle is finite (operands "
                     f"overflowing a narrower format?)")
    if not parts:
        parts.append("subnormal results are wrong but not flushed to zero")
    if inputs_flushed and not outputs_flushed and ftz_total:
        parts.append("subnormal outputs of normal inputs are kept")
    if outputs_flushed and not inputs_flushed and not inputs_unclear and daz_fail == 0 \
            and any(c.case.family == "subnormal-inputs" for c in comps):
        parts.append("subnormal inputs are honoured")
    where = ("inputs and outputs" if inputs_flushed and outputs_flushed else
             "inputs" if inputs_flushed else "outputs" if outputs_flushed else
             "inputs or outputs" if inputs_unclear else "none")
    return Diagnosis(summary="; ".join(parts), quantities={
        "flushed": where, "flushed_outputs": ftz_flushed, "subnormal_outputs": ftz_total,
        "daz_matches": daz_match, "failing_with_subnormal_inputs": daz_fail,
        "normal_results_zeroed": daz_normal_zero, "normal_results_as_if_zero": daz_normal_match,
        "flushed_intermediates": mid_zero, "nonfinite_outputs": nonfinite})


# -- C-PRC-04 cast: rounding mode ---------------------------------------------------------------

def conversion_inputs(shape: dict, fmt, kind: str, rng) -> dict:
    """float32 inputs for a conversion to ``fmt`` where rounding modes disagree.

    ``ties``: values exactly halfway between two neighbours in ``fmt`` (normal and
    subnormal), where nearest-even and nearest-away differ; ``overflow-edge``: values
    at and just beyond the largest finite number, where nearest rounding overflows to
    inf and truncation saturates."""
    fmt = get_format(fmt)
    R, N = int(shape["R"]), int(shape["N"])
    n = R * N
    p = fmt.precision
    sign = _signs(rng, n)
    if kind == "ties":
        e = rng.integers(fmt.emin, min(fmt.emax, 60) + 1, n).astype(np.float64)
        m = rng.integers(2 ** (p - 1), 2 ** p, n).astype(np.float64)
        normal = (m + 0.5) * 2.0 ** (e - p + 1)
        k = rng.integers(0, 2 ** (p - 1), n).astype(np.float64)
        subn = (k + 0.5) * fmt.smallest_subnormal
        x = np.where(rng.random(n) < 0.8, normal, subn)
    elif kind == "overflow-edge":
        top = 2.0 ** (fmt.emax - p + 1)  # spacing at the largest binade
        steps = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0, 1.5], n)
        x = fmt.max + steps * top
    else:
        raise ValueError(f"unknown conversion probe {kind!r}")
    return {"x": _store((x * sign).reshape(R, N), np.float32)}


@protocol("conversion_probe", oracles=("fp64",),
          params={"probes": ((list, tuple), ("ties", "overflow-edge")), "kwargs": (dict, {})},
          description="the families, plus exact ties and values at the overflow threshold of "
                      "the target format (cast)")
def conversion_probe(ctx: Context):
    t0 = time.perf_counter()
    if not ctx.op.conversion:
        return lacking(ctx, Lacks("conversion", "the op is not a format conversion"))
    cases = list(ctx.iter_cases())
    for shape in ctx.shapes():
        for kind in ctx.param("probes"):
            for trial in range(ctx.protocol.trials):
                rng = ctx.rng(ctx.op.describe_shape(shape), "conversion", kind, trial)
                cases.append((ctx.case(shape, kind, trial),
                              conversion_inputs(shape, ctx.dtype, kind, rng)))
    comps, skipped = compare_cases(ctx, cases)
    return verdict_from(ctx, comps, t0, skipped=skipped)


@detector("rounding_mode",
          "the rounding mode the conversion matches: nearest-even, nearest-away, toward zero, "
          "toward +inf, toward -inf")
def rounding_mode(ctx: Context, evidence) -> Diagnosis:
    comps = _comparisons(evidence)
    fmt = ctx.op.output_format(ctx.dtype)
    xs, outs = [], []
    for c in comps:
        x = c.env.get("x")
        if x is None:
            continue
        fin = np.isfinite(np.asarray(x))
        xs.append(np.asarray(x)[fin])
        outs.append(c.out[fin])
    if not xs:
        return Diagnosis(summary="no conversion inputs to compare")
    info = identify_rounding(np.concatenate(xs), np.concatenate(outs), fmt)
    m = info["rounding_mode"]
    share = info["rounding_matches"][m]
    rne = info["rounding_matches"]["rne"]
    if share >= 0.99 and m != "rne":
        summary = (f"conversion to {short(fmt)} matches {info['rounding_mode_name']} on "
                   f"{share:.0%} of {info['informative_elements']} inexact elements, not "
                   f"round-to-nearest-even ({rne:.0%})")
    elif share >= 0.99:
        summary = "conversion rounds to nearest even; the mismatch is elsewhere"
    else:
        summary = (f"no IEEE rounding mode explains the conversion (closest: "
                   f"{info['rounding_mode_name']}, {share:.0%}; nearest-even {rne:.0%})")
    return Diagnosis(summary=summary, quantities=info)


__all__ = ["precision_fingerprint", "unstable_formulation", "subnormal_probe", "subnormal_flush",
           "rounding_mode", "conversion_probe", "conversion_inputs", "subnormal_inputs"]
