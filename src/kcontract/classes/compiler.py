"""The compiler-induced family (C-CMP-01..03): protocols and signature detectors.

Protocols
    ``fusion``   (C-CMP-01) the fused kernel against the float64 *unfused* composition of
                 its reference stages (the op's oracle), or against the declared
                 approximation (``approximation=tanh``: the tanh form of GELU) when one is
                 declared; the contract's tolerance is the composed one.
    ``configs``  (C-CMP-02) every configuration the kernel module exports in ``CONFIGS``
                 (plus the default call without ``config=``), on the same inputs: each
                 against the oracle, and every pair against each other (the protocol
                 provides ``other``, the other configuration's output; ``other = ref``
                 when a configuration is compared with the oracle).
    ``shapes``   (C-CMP-03) the benchmarked shape (the op's ``basic_shape``) and the
                 held-out shape class (the op's ``shape_class`` plus the contract's
                 ``shapes``); a kernel that raises or returns the wrong shape at a
                 held-out shape fails *that shape*; then a freshness check at the
                 benchmarked shape (new inputs, then the first inputs again) for outputs
                 that are not a function of the current inputs.

Detectors
    ``fusion_divergence``  (C-CMP-01) how far past the composed tolerance, new NaN/Inf,
                           and which substitution explains the output: the tanh or sigmoid
                           approximation of GELU, operands rounded to a narrower format,
                           probabilities rounded before the second product, a per-row
                           scale error of the softmax normaliser.
    ``config_breakers``    (C-CMP-02) the configuration(s) that break the contract.
    ``shape_predicate``    (C-CMP-03) held-out against benchmarked pass rate, the failing
                           shapes, and the simplest shape predicate that separates the
                           failing shapes from the passing ones (probing a few extra shapes
                           to tell candidates apart); stale outputs.
"""
from __future__ import annotations

import hashlib
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from ..adapters.base import Adapter
from ..check.engine import Comparison, Context, KernelFailure
from ..check.sandbox import output_digest
from ..check.verdict import Diagnosis
from ..errors import UsageError
from ..diagnosis import establish
from ..language.registry import detector, protocol
from .common import summarize, verdict_from, worst

# -- shared helpers -----------------------------------------------------------------------------

def _is_integrity(fail: KernelFailure) -> bool:
    """Tampering with the process or the inputs is never a shape or configuration issue."""
    return fail.code.startswith("integrity.")


def _ratio(c: Comparison) -> float:
    """Worst error over the tolerance at the worst element of a comparison (inf: non-finite)."""
    st = c.stats()
    m, a = st.get("measured"), st.get("allowed")
    if m is None:
        return 0.0
    if not np.isfinite(m):
        return math.inf
    if not a:
        return math.inf if m > 0 else 0.0
    return float(m / a)


def _fmt_ratio(r: float) -> str:
    return "inf" if not np.isfinite(r) else f"{r:.3g}"


def _new_nonfinite(c: Comparison) -> int:
    with np.errstate(invalid="ignore"):
        return int(np.count_nonzero(~np.isfinite(c.out) & np.isfinite(c.ref)))


def _cmp_reason(c: Comparison) -> str:
    st = c.stats()
    nf = _new_nonfinite(c)
    text = (f"{st['mismatched']} of {st['total']} elements out of tolerance "
            f"(worst {_fmt_ratio(_ratio(c))}x the allowed error)")
    if nf:
        text += f", {nf} NaN/Inf where the reference is finite"
    return text


def _inputs_digest(inputs) -> str:
    h = hashlib.sha1()
    for k in sorted(inputs):
        h.update(k.encode())
        h.update(_digest(np.asarray(inputs[k])).encode())
    return h.hexdigest()


def describe(op, shape) -> str:
    """The shape's symbols, leaving out optional ones that are absent (matmul's B = 0)."""
    return op.describe_shape({k: v for k, v in shape.items() if int(v) != 0}) or "scalar"


_digest = output_digest

#: what a stale output repeats when it is the output of a decoy call (the checker's own calls
#: on shuffled inputs, whose outputs it never judges)
DECOY_CALL = "an earlier call on other inputs (one of the checker's unjudged decoy calls)"


def _decoy_digests(ctx: Context) -> set:
    return getattr(ctx.kernel, "decoy_digests", None) or set()


# ================================================================================================
# C-CMP-01: fusion equivalence
# ================================================================================================

@protocol("fusion", oracles=("unfused",), params={"kwargs": (dict, {})},
          description="the fused kernel against the float64 unfused composition of its reference "
                      "stages (or the declared approximation), under the composed tolerance; "
                      "shapes x families x trials")
def fusion(ctx: Context):
    t0 = time.perf_counter()
    comps: list[Comparison] = []
    skipped = 0
    for case, inputs in ctx.iter_cases():
        # the contract's oracle (unfused): the declared approximation where there is one
        ref, x = ctx.reference(inputs)
        if not ctx.precondition_holds(case, inputs, ref, x):
            skipped += 1
            continue
        out = ctx.run(inputs, case)
        comps.append(ctx.evaluate(case, inputs, out, ref, x=x))
    approx = ctx.claims.approximation
    oracle = (f"the {approx} form (declared approximation={approx})"
              if approx in ctx.op.approximations else "the unfused float64 composition")
    return verdict_from(ctx, comps, t0, skipped=skipped, evidence={"oracle": oracle})


def _fusion_candidates(ctx: Context, x: dict) -> list[tuple[str, np.ndarray]]:
    """Alternative compositions a fused kernel may have computed instead (the op's
    ``fusion_emulations`` capability): (label, float64)."""
    return ctx.op.fusion_emulations(x, ctx.dtype, ctx.claims.approximation, **ctx.kwargs())


def _row_scale_residual(c: Comparison) -> Optional[float]:
    """Residual after fitting one scale factor per output row (last axis): small when the
    error is a per-row scaling, as a wrong softmax normaliser (a missed online-softmax
    rescale) produces."""
    out, ref = c.out, c.ref
    if out.ndim < 2 or out.shape[-1] < 2:
        return None
    with np.errstate(all="ignore"):
        den = np.sum(ref * ref, axis=-1, keepdims=True)
        scale = np.where(den > 0, np.sum(out * ref, axis=-1, keepdims=True) / den, 1.0)
        d = out - scale * ref
        e = out - ref
    ok = np.isfinite(d) & np.isfinite(e)
    base = float(np.sum(e[ok] ** 2))
    if base == 0.0:
        return None
    return math.sqrt(float(np.sum(d[ok] ** 2)) / base)


@detector("fusion_divergence",
          "how far the fused kernel is from the unfused composition (in units of the composed "
          "tolerance), new NaN/Inf, and which substitution explains it: a GELU approximation "
          "(tanh, sigmoid), operands or intermediates rounded to a narrower format, a per-row "
          "normaliser error")
def fusion_divergence(ctx: Context, evidence) -> Diagnosis:
    comps = [c for c in (evidence.get("comparisons") or []) if not c.passed]
    if not comps:
        return Diagnosis()
    ratio = max(_ratio(c) for c in comps)
    mism = sum(c.mismatched for c in comps)
    total = sum(c.total for c in comps)
    new_nf = sum(_new_nonfinite(c) for c in comps)
    sig: dict[str, Any] = {"divergence_over_tolerance": ratio if np.isfinite(ratio) else "inf",
                           "elements_beyond": f"{mism} of {total}", "new_nonfinite": new_nf,
                           "oracle": evidence.get("oracle", "the unfused float64 composition")}
    # which alternative composition explains the output
    scores: dict[str, list[float]] = {}
    row_scale: Optional[float] = None
    for c in comps[:4]:
        x = {k: v for k, v in c.env.items() if k in ctx.op.inputs}
        e = c.out - c.ref
        fin = np.isfinite(e)
        if not fin.any():
            continue
        for label, emul in _fusion_candidates(ctx, x):
            with np.errstate(all="ignore"):
                d = c.out - emul
            ok = fin & np.isfinite(d)
            scores.setdefault(label, [0.0, 0.0])
            scores[label][0] += float(np.sum(d[ok] ** 2))
            scores[label][1] += float(np.sum(e[ok] ** 2))
        rs = _row_scale_residual(c) if ctx.op.normalised_rows else None
        if rs is not None:
            row_scale = rs if row_scale is None else max(row_scale, rs)
    residuals = {k: math.sqrt(v[0] / v[1]) for k, v in scores.items() if v[1] > 0}
    best = min(residuals.items(), key=lambda kv: kv[1]) if residuals else None
    if best is not None:
        sig["closest_substitution"] = best[0]
        sig["residual_share"] = round(best[1], 4)
    head = (f"diverges from {sig['oracle']} by up to {_fmt_ratio(ratio)}x the composed tolerance "
            f"({mism} of {total} elements)")
    if all(np.all(c.out == 0) for c in comps):
        return Diagnosis(summary=f"{head}: the outputs are all zero (nothing computed)",
                         quantities=sig)
    if new_nf:
        head = (f"creates {new_nf} NaN/Inf where {sig['oracle']} is finite; " + head)
    if best is not None and best[1] < 0.5:
        what = best[0]
        if "approximation" in what or "erf form" in what:
            sig["approximation"] = ("erf" if "erf form" in what else
                                    "tanh" if "tanh" in what else "sigmoid")
            tail = ("; declare approximation=tanh if that is intended" if sig["approximation"] == "tanh"
                    else "")
            sig["summary"] = (f"{head}: the output matches {what} (it leaves {best[1]:.1%} of "
                              f"the divergence){tail}")
        else:
            sig["summary"] = (f"{head}: the output matches an emulation with {what} (it leaves "
                              f"{best[1]:.1%} of the divergence)")
    elif row_scale is not None and row_scale < 0.3:
        sig["row_scale_residual"] = round(row_scale, 4)
        sig["summary"] = (f"{head}: each output row is off by a common factor (a wrong softmax "
                          f"normaliser, e.g. a missed online-softmax rescale)")
    else:
        sig["summary"] = (f"{head}; no operand rounding, GELU approximation or row scaling "
                          f"explains it (an approximate exp, reciprocal or reordered stage in the "
                          f"fused code?)")
    summary = sig.pop("summary")
    return Diagnosis(summary=summary, quantities=sig)


# ================================================================================================
# C-CMP-02: schedule and autotune invariance
# ================================================================================================

def config_label(cfg: Optional[dict]) -> str:
    if cfg is None:
        return "default"
    return "{" + ", ".join(f"{k}={v!r}" for k, v in cfg.items()) + "}"


@protocol("configs", oracles=("self",), params={"kwargs": (dict, {})},
          provides=("other",),
          description="every configuration in the kernel module's CONFIGS (called with "
                      "config=<dict>) and the default call, on the same inputs: each against the "
                      "oracle, every pair against each other ('other'); skipped without CONFIGS")
def configs(ctx: Context):
    t0 = time.perf_counter()
    info = ctx.kernel_info or {}
    cfgs = info.get("configs")
    if not cfgs:
        return ctx.skipped("kernel exposes no CONFIGS"
                           + (" (its CONFIGS list is empty)" if cfgs is not None else ""))
    if not all(isinstance(c, dict) for c in cfgs):
        raise KernelFailure("kernel.bad-configs",
                            "CONFIGS must be a list of dicts (one per configuration), got "
                            + ", ".join(type(c).__name__ for c in cfgs))
    accepts = info.get("accepts")
    if accepts is not None and "config" not in accepts and not info.get("var_kw"):
        raise KernelFailure("kernel.no-config-param",
                            "the kernel module exports CONFIGS but the kernel takes no config= "
                            "keyword, so its configurations cannot be selected")
    choices: list[Optional[dict]] = [None] + [dict(c) for c in cfgs]
    labels = [config_label(c) for c in choices]
    per = {lab: {"config": lab, "cases": 0, "failed": 0, "worst_ratio": 0.0, "raised": ""}
           for lab in labels}
    pair_stats: dict[tuple, dict] = {}
    comps: list[Comparison] = []
    pair_comps: list[Comparison] = []
    first_fail: Optional[KernelFailure] = None
    attempted = 0
    for case, inputs in ctx.iter_cases():
        ref, x = ctx.reference(inputs)
        if not ctx.precondition_holds(case, inputs, ref, x):
            continue
        outs: dict[int, np.ndarray] = {}
        for i, cfg in enumerate(choices):
            kw = ctx.kwargs()
            if cfg is not None:
                kw["config"] = dict(cfg)
            ccase = ctx.case(case.shape, case.family, case.trial, config=labels[i])
            attempted += 1
            try:
                out = ctx.run(inputs, ccase, kw)
            except KernelFailure as fail:
                if _is_integrity(fail):
                    raise
                first_fail = first_fail or fail
                per[labels[i]]["raised"] = per[labels[i]]["raised"] or fail.message
                per[labels[i]]["cases"] += 1
                per[labels[i]]["failed"] += 1
                continue
            outs[i] = out
            c = ctx.evaluate(ccase, inputs, out, ref, x=x, extra={"other": ref})
            comps.append(c)
            p = per[labels[i]]
            p["cases"] += 1
            if not c.passed:
                p["failed"] += 1
                p["worst_ratio"] = max(p["worst_ratio"], _ratio(c))
        for i, j in itertools.combinations(sorted(outs), 2):
            pcase = ctx.case(case.shape, case.family, case.trial,
                             config=f"{labels[i]} vs {labels[j]}")
            pc = ctx.evaluate(pcase, inputs, outs[i], ref, x=x, extra={"other": outs[j]})
            spread = pc.env.get("spread")
            if spread is None:
                spread = 2 * np.asarray(pc.tol if pc.tol is not None else 0.0)
            with np.errstate(invalid="ignore"):
                d = np.abs(np.asarray(outs[i], np.float64) - np.asarray(outs[j], np.float64))
                beyond = ~(d <= spread)
            ps = pair_stats.setdefault((labels[i], labels[j]), {"pair": f"{labels[i]} vs {labels[j]}",
                                                                "beyond": 0, "worst_ratio": 0.0})
            nb = int(np.count_nonzero(beyond))
            if nb:
                ps["beyond"] += nb
                with np.errstate(all="ignore"):
                    r = np.where(beyond, d / np.maximum(np.broadcast_to(spread, d.shape), 1e-300), 0)
                rr = float(np.nanmax(np.where(np.isnan(r), np.inf, r)))
                ps["worst_ratio"] = max(ps["worst_ratio"], rr)
            pair_comps.append(pc)
    if attempted and not comps:
        # nothing ran at all, under any configuration: the kernel is broken, not one config
        raise first_fail
    if not attempted:
        return ctx.skipped("no case met the precondition")
    breaking = [lab for lab in labels if per[lab]["failed"]]
    bad_pairs = [p for p in pair_stats.values() if p["beyond"]]
    all_comps = comps + pair_comps
    rows = summarize(comps)
    details = {"cases": rows, "configs": list(per.values()), "pairs": list(pair_stats.values())}
    if not breaking and not bad_pairs and all(c.passed for c in all_comps):
        return ctx.passed(f"{len(labels)} configurations x {len(comps) // max(1, len(labels))} "
                          f"cases conform, pairwise within the reordering bound",
                          details=details, seconds=time.perf_counter() - t0)
    ev = {"comparisons": all_comps, "rows": rows, "per_config": per, "pairs": pair_stats,
          "labels": labels, "breaking": breaking, "bad_pairs": bad_pairs}
    diag = ctx.run_detector(ev)
    sig = dict(diag.quantities)
    headline = diag.summary or (
        f"{ctx.contract.signature.summary}: {', '.join(breaking) or 'pairwise spread'}")
    bad = worst([c for c in comps if not c.passed]) or worst([c for c in all_comps if not c.passed])
    sig.setdefault("breaking_configs", breaking)
    if bad is None:  # only exceptions
        lab = breaking[0]
        v = ctx.violation(None, message=headline, quantities=sig,
                          case=ctx.case(ctx.shapes()[0], ctx.protocol.families[0], 0, config=lab))
    else:
        v = ctx.violation(bad, message=headline, quantities=sig)
    return ctx.violated(v, signature=sig, details=details, seconds=time.perf_counter() - t0)


@detector("config_breakers",
          "the configuration(s) that break the contract: each one's failures against the oracle "
          "(worst error over the tolerance, or the exception), and the pairs of configurations "
          "further apart than the reordering bound")
def config_breakers(ctx: Context, evidence) -> Diagnosis:
    per = evidence.get("per_config") or {}
    labels = evidence.get("labels") or list(per)
    breaking = [lab for lab in labels if per.get(lab, {}).get("failed")]
    bad_pairs = evidence.get("bad_pairs") or []
    conforming = [lab for lab in labels if lab not in breaking]
    parts = []
    for lab in breaking:
        p = per[lab]
        if p["raised"]:
            parts.append(f"{lab} (raised: {p['raised'][:120]})")
        else:
            parts.append(f"{lab} (error up to {_fmt_ratio(p['worst_ratio'])}x the accumulation "
                         f"tolerance in {p['failed']} of {p['cases']} cases)")
    sig: dict[str, Any] = {
        "breaking_configs": breaking,
        "conforming_configs": conforming,
        "config_results": [{"config": lab, "cases": per[lab]["cases"], "failed": per[lab]["failed"],
                            "worst_ratio": (per[lab]["worst_ratio"]
                                            if np.isfinite(per[lab]["worst_ratio"]) else "inf"),
                            "raised": per[lab]["raised"]} for lab in labels if lab in per],
        "pairs_beyond_bound": [p["pair"] for p in bad_pairs],
    }
    if breaking:
        noun = "configuration" if len(breaking) == 1 else "configurations"
        text = f"{noun} {'; '.join(parts)} break{'s' if len(breaking) == 1 else ''} the contract"
        if "default" in breaking:
            text += " (the default call included)"
        if conforming:
            text += f"; {', '.join(conforming)} conform"
        if bad_pairs:
            text += f"; {len(bad_pairs)} pair(s) beyond the reordering bound"
        sig["summary"] = text
    elif bad_pairs:
        sig["summary"] = ("configurations " + "; ".join(p["pair"] for p in bad_pairs)
                          + " are further apart than the reordering bound")
    summary = sig.pop("summary", "")
    return Diagnosis(summary=summary, quantities=sig)


# ================================================================================================
# C-CMP-03: shape-polymorphism preservation
# ================================================================================================

@dataclass
class ShapeResult:
    shape: dict
    role: str  # benchmark | held-out | probe
    passed: bool = True
    reason: str = ""
    comps: list = field(default_factory=list)
    failure: Optional[KernelFailure] = None
    digests: list = field(default_factory=list)
    #: the failure is explained by a stale output (identical to a later call's on other inputs)
    stale: bool = False
    #: the inputs' memory layout when not contiguous (role "layout")
    layout: str = ""

    def describe(self, op) -> str:
        where = describe(op, self.shape)
        return f"{where} ({self.layout} inputs)" if self.layout else where


def _run_shape(ctx: Context, shape: dict, role: str, history: list, keys=(),
               layout: str = "") -> ShapeResult:
    res = ShapeResult(dict(shape), role, layout=layout)
    for family in ctx.protocol.families:
        for trial in range(ctx.protocol.trials):
            extra = {"probe": True} if role == "probe" else {}
            if layout:
                extra["layout"] = layout
            case = ctx.case(shape, family, trial, **extra)
            inputs = ctx.inputs(shape, family, trial, *keys)
            ref, x = ctx.reference(inputs)
            if not ctx.precondition_holds(case, inputs, ref, x):
                continue
            try:
                out = ctx.run(inputs, case, layout=layout or None)
            except KernelFailure as fail:
                if _is_integrity(fail):
                    raise
                res.passed = False
                res.failure = fail
                res.reason = fail.message
                return res
            dig = _digest(out)
            res.digests.append(dig)
            history.append((f"the earlier call at the {role} shape {describe(ctx.op, shape)} "
                            f"({family} inputs)", dig, _inputs_digest(inputs)))
            c = ctx.evaluate(case, inputs, out, ref, x=x)
            res.comps.append(c)
            if not c.passed and res.passed:
                res.passed = False
                res.reason = _cmp_reason(c)
    return res


def _freshness(ctx: Context, shape: dict, history: list) -> tuple[list[dict], list[Comparison]]:
    """Same shape, new inputs X1 then X2, then X1 again: each output must meet the contract
    for the inputs of *its* call.  A failing output bitwise identical to an earlier call's
    output is stale (cached, or memory holding an earlier result)."""
    family = ctx.protocol.families[0]
    x1 = ctx.inputs(shape, family, 0, "fresh-1")
    x2 = ctx.inputs(shape, family, 0, "fresh-2")
    stale: list[dict] = []
    comps: list[Comparison] = []
    where = describe(ctx.op, shape)
    for step, (name, inputs) in enumerate((("the call with new inputs X1", x1),
                                           ("the call with new inputs X2", x2),
                                           ("the call with X1 again, after X2", x1)), start=1):
        case = ctx.case(shape, family, 0, freshness=step)
        ref, x = ctx.reference(inputs)
        try:
            out = ctx.run(inputs, case)
        except KernelFailure as fail:
            if _is_integrity(fail):
                raise
            stale.append({"call": f"{name} at {where}", "case": case, "digest": None,
                          "reason": f"failed on a repeated call: {fail.message}",
                          "identical_to": None})
            continue
        dig = _digest(out)
        idig = _inputs_digest(inputs)
        c = ctx.evaluate(case, inputs, out, ref, x=x)
        comps.append(c)
        if not c.passed:
            # the output of an earlier call on *other* inputs
            same = [label for label, d, i in history if d == dig and i != idig]
            if not same and dig in _decoy_digests(ctx):
                same = [DECOY_CALL]
            stale.append({"call": f"{name} at {where}", "reason": _cmp_reason(c), "digest": dig,
                          "identical_to": same[0] if same else None, "case": case, "cmp": c})
        history.append((f"{name} at {where}", dig, idig))
    return stale, comps


@protocol("shapes", oracles=("fp64", "unfused"),
          params={"probes": (int, 8), "freshness": (bool, True), "kwargs": (dict, {}),
                  "layouts": (list, list(Adapter.LAYOUTS))},
          description="the benchmarked shape and the held-out shape class (the op's shape_class "
                      "plus the contract's shapes), a raise or a wrong output shape counting as a "
                      "failing shape; then a freshness check at the benchmarked shape, and the "
                      "benchmarked shape again with its inputs given as non-contiguous views "
                      "(`layouts`: transposed, strided); the detector may probe up to `probes` "
                      "more shapes")
def shapes(ctx: Context):
    t0 = time.perf_counter()
    op = ctx.op
    bench = op.full_shape({})
    held: list[dict] = []
    for s in list(op.shape_class) + list(ctx.protocol.shapes or ()):
        fs = op.full_shape(s)
        if fs != bench and fs not in held:
            held.append(fs)
    history: list = []
    results = [_run_shape(ctx, bench, "benchmark", history)]
    results += [_run_shape(ctx, s, "held-out", history) for s in held]
    if all(r.failure is not None for r in results):
        # fails the same way everywhere, the benchmark included: a broken kernel, not a
        # shape-specialised one
        raise results[0].failure
    stale: list[dict] = []
    fresh_comps: list[Comparison] = []
    if ctx.param("freshness", True):
        stale, fresh_comps = _freshness(ctx, bench, history)
        if not results[0].passed:
            # the benchmarked shape already fails on its first call: a repeated call that fails
            # the same way is that failure again, not evidence of a stale output, unless it
            # returns another call's output or raises where the first call did not
            stale = [s for s in stale if s.get("identical_to") or s.get("digest") is None]
    # a sweep output that a later call on other inputs returns again is a stale output (say,
    # left over from calls before this check), not evidence about the shape
    stale_digests = {s["digest"] for s in stale if s.get("digest")}
    decoys = _decoy_digests(ctx)
    for r in results:
        if not r.passed and r.failure is None and stale_digests.intersection(r.digests):
            r.stale = True
        elif not r.passed and r.failure is None and decoys.intersection(r.digests):
            # the output of one of the checker's decoy calls, on other inputs
            r.stale = True
            bad = next((c for c in r.comps if not c.passed), None)
            stale.append({"call": f"the call at the {r.role} shape {r.describe(op)}",
                          "reason": r.reason, "digest": next(d for d in r.digests if d in decoys),
                          "identical_to": DECOY_CALL, "case": bad.case if bad else None,
                          "cmp": bad})
    failing = [r for r in results if not r.passed and not r.stale]
    failing, precision_only = establish.shape_failures(results[0], failing)  # not shape faults
    # the same shape, its inputs as non-contiguous views: a kernel that reads memory as if
    # every input were contiguous is right at every shape and wrong here
    layouts: list[ShapeResult] = []
    if results[0].passed or results[0].stale:
        for lay in ctx.param("layouts", list(Adapter.LAYOUTS)) or ():
            if lay not in Adapter.LAYOUTS:
                raise UsageError(f"{ctx.contract.id}: unknown layout {lay!r} "
                                 f"({', '.join(Adapter.LAYOUTS)})")
            earlier = {d: DECOY_CALL for d in _decoy_digests(ctx)}
            earlier.update({d: label for label, d, _ in history})
            r = _run_shape(ctx, bench, "layout", history, keys=("layout", lay), layout=lay)
            layouts.append(r)
            same = [earlier[d] for d in r.digests if d in earlier]
            if not r.passed and r.failure is None and same:
                # the output of an earlier call on other inputs: staleness, not the layout
                r.stale = True
                stale.append({"call": f"the call with {lay} views at {describe(op, bench)}",
                              "reason": r.reason, "digest": r.digests[0],
                              "identical_to": same[0], "case": r.comps[0].case if r.comps
                              else None, "cmp": next((c for c in r.comps if not c.passed), None)})
    bad_layouts = [r for r in layouts if not r.passed and not r.stale]
    comps = [c for r in results + layouts for c in r.comps]
    rows = summarize(comps + fresh_comps)
    details = {"cases": rows, "shapes": [{"shape": r.describe(op), "role": r.role, "passed": r.passed,
                                          "reason": r.reason} for r in results + layouts]}
    if not failing and not stale and not bad_layouts and precision_only:
        return ctx.passed(establish.precision_message(results[0], precision_only, op),
                          details=details, seconds=time.perf_counter() - t0)
    if not failing and not stale and not bad_layouts:
        n_fresh = ", fresh outputs on repeated calls" if ctx.param("freshness", True) else ""
        n_lay = (f", inputs as {' and '.join(r.layout for r in layouts)} views" if layouts else "")
        return ctx.passed(f"benchmarked shape and {len(held)} held-out shapes conform"
                          f"{n_fresh}{n_lay}", details=details,
                          seconds=time.perf_counter() - t0)
    ev = {"results": results, "stale": stale, "benchmark": bench, "history": history,
          "layouts": layouts, "comparisons": comps + fresh_comps}
    diag = ctx.run_detector(ev)
    if not diag:
        diag = _shape_signature(ctx, ev, probe=False)
    sig = dict(diag.quantities)
    headline = diag.summary or ctx.contract.signature.summary
    details["shapes"] = diag.details.get("shapes", details["shapes"])
    every = failing and not any(r.passed for r in results)
    code = (f"{ctx.contract.cls}.fails-at-every-shape" if every  # not shape-specific at all
            else None if failing else f"{ctx.contract.cls}.stale-output" if stale
            else f"{ctx.contract.cls}.layout-specialised")
    # the evidence the violation points at: the failing shapes, else a stale call, else
    # the failing layouts
    shown = failing or ([] if stale else bad_layouts)
    bad = worst([c for r in shown for c in r.comps])
    if bad is None and stale:
        bad = next((s["cmp"] for s in stale if s.get("cmp") is not None), None)
    if bad is not None:
        v = ctx.violation(bad, code=code, message=headline, quantities=sig)
    else:  # raised or returned a wrong shape: no comparison to point at
        first = shown[0] if shown else None
        extra = {"layout": first.layout} if first is not None and first.layout else {}
        fcase = (first.failure.case if first is not None and first.failure is not None
                 and first.failure.case is not None else
                 stale[0]["case"] if first is None and stale else
                 ctx.case(first.shape if first else bench, ctx.protocol.families[0], 0, **extra))
        v = ctx.violation(None, code=code, message=headline, quantities=sig, case=fcase)
    return ctx.violated(v, signature=sig, details=details, seconds=time.perf_counter() - t0)


# -- predicates over shapes --------------------------------------------------------------------

@dataclass(frozen=True)
class Atom:
    """One candidate predicate: true where the kernel is predicted to FAIL."""

    text: str
    rank: float  # simplicity: lower is simpler
    fn: Callable[[dict], bool]
    symbols: tuple = ()
    order: float = 0.0  # tie-break within a rank


MODULI = (2, 4, 8, 16, 32, 64)


def _numel_info(op) -> Optional[tuple[str, Callable[[dict], int]]]:
    """The element count of the op's first input, as a derived symbol ``R*N``."""
    sentinels = {sym: 1000 + i for i, sym in enumerate(op.symbols)}
    try:
        dims = op.input_shapes(sentinels)[op.inputs[0]]
    except Exception:  # pragma: no cover - an op without symbolic shapes
        return None
    inv = {v: k for k, v in sentinels.items()}
    names = [inv.get(d) for d in dims]
    if len(names) < 2 or any(n is None for n in names):
        return None
    first = op.inputs[0]

    def numel(s: dict) -> int:
        return int(np.prod(op.input_shapes(s)[first]))
    return "*".join(names), numel


def build_atoms(op, observed: list[dict], bench: dict) -> list[Atom]:
    """Candidate predicates over the op's symbols (and, one step less simple, the first
    input's element count): SYM == 1, SYM % m != 0, SYM != benchmark value, SYM < c,
    SYM > c, and shape != benchmark shape."""
    syms: list[tuple[str, Callable[[dict], int], float]] = [
        (s, (lambda s_: (lambda sh: int(sh.get(s_, 0))))(s), 0.0) for s in op.symbols]
    ni = _numel_info(op)
    if ni is not None and not any(int(v) == 0 for s in observed for v in s.values()):
        syms.append((ni[0], ni[1], 0.5))
    atoms: list[Atom] = []
    for name, get, extra in syms:
        values = sorted({get(s) for s in observed})
        has_zero = 0 in values  # an optional symbol (matmul's B): 0 means absent
        bval = get(bench)
        if not has_zero:
            atoms.append(Atom(f"{name} == 1", 0 + extra,
                              (lambda g: lambda s: g(s) == 1)(get), (name,)))
            for m in MODULI:
                atoms.append(Atom(f"{name} % {m} != 0", 1 + extra,
                                  (lambda g, m_: lambda s: g(s) % m_ != 0)(get, m), (name,),
                                  order=-m))
        atoms.append(Atom(f"{name} != {bval}", 2 + extra,
                          (lambda g, b: lambda s: g(s) != b)(get, bval), (name,)))
        for c in values:
            atoms.append(Atom(f"{name} < {c}", 3 + extra,
                              (lambda g, c_: lambda s: g(s) < c_)(get, c), (name,), order=c))
            atoms.append(Atom(f"{name} > {c}", 3 + extra,
                              (lambda g, c_: lambda s: g(s) > c_)(get, c), (name,), order=-c))
    bdesc = describe(op, bench)
    atoms.append(Atom(f"shape != benchmark shape ({bdesc})", 4,
                      lambda s: any(int(s.get(k, 0)) != int(v) for k, v in bench.items()),
                      tuple(op.symbols)))
    return atoms


def separating(atoms, obs: list[tuple[dict, bool]]) -> list[Atom]:
    """Atoms that predict exactly the failing observations (``obs``: (shape, failed))."""
    return [a for a in atoms if all(a.fn(s) == failed for s, failed in obs)]


def separating_pairs(atoms, obs, limit: int = 40) -> list[Atom]:
    """Disjunctions ``A or B`` of two simple atoms that separate, simplest first."""
    fail_shapes = [s for s, f in obs if f]
    pass_shapes = [s for s, f in obs if not f]
    # an atom of an "or" may never predict a failure where the kernel passed
    ok = [a for a in atoms if a.rank < 4 and not any(a.fn(s) for s in pass_shapes)]
    out = []
    for a, b in itertools.combinations(ok, 2):
        if a.symbols == b.symbols:
            continue
        if all(a.fn(s) or b.fn(s) for s in fail_shapes):
            out.append(Atom(f"{a.text} or {b.text}", a.rank + b.rank + 4,
                            (lambda fa, fb: lambda s: fa(s) or fb(s))(a.fn, b.fn),
                            tuple(dict.fromkeys(a.symbols + b.symbols)), a.order + b.order))
    out.sort(key=lambda h: (h.rank, h.order))
    return out[:limit]


def hypotheses(atoms, obs) -> list[Atom]:
    """Single predicates that separate; if none, disjunctions of two."""
    single = separating(atoms, obs)
    return single if single else separating_pairs(atoms, obs)


def closest_predicate(atoms, obs) -> Optional[tuple[Atom, int]]:
    """When nothing separates exactly: the single predicate or disjunction of two that
    misclassifies the fewest shapes (simplest among equals)."""
    simple = [a for a in atoms if a.rank < 4]
    best: Optional[tuple[Atom, int]] = None

    def consider(h: Atom):
        nonlocal best
        miss = sum(1 for s, f in obs if h.fn(s) != f)
        if best is None or (miss, h.rank, h.order) < (best[1], best[0].rank, best[0].order):
            best = (h, miss)
    for a in atoms:
        consider(a)
    for a, b in itertools.combinations(simple, 2):
        if a.symbols != b.symbols:
            consider(Atom(f"{a.text} or {b.text}", a.rank + b.rank + 4,
                          (lambda fa, fb: lambda s: fa(s) or fb(s))(a.fn, b.fn),
                          tuple(dict.fromkeys(a.symbols + b.symbols)), a.order + b.order))
    return best


def _probe_values(b: int) -> list[int]:
    vals = set(range(1, 130)) | {b - 1, b + 1, b // 2, 2 * b, b + 16, b + 32, b + 64}
    return sorted(v for v in vals if v >= 1 and v != b)


def _size(s: dict) -> int:
    return int(np.prod([max(1, int(x)) for x in s.values()]))


def choose_probe(op, cands: list[Atom], bench: dict, seen: list[dict]) -> Optional[dict]:
    """A shape (the benchmark with one symbol changed) on which the candidates disagree
    most evenly; the smallest such shape among equals."""
    best, best_key = None, None
    for sym in op.symbols:
        b = int(bench.get(sym, 0))
        for v in _probe_values(b):
            s = dict(bench)
            s[sym] = v
            if s in seen:
                continue
            nf = sum(1 for a in cands if a.fn(s))
            score = min(nf, len(cands) - nf)
            if score == 0:
                continue
            key = (-score, _size(s))
            if best_key is None or key < best_key:
                best, best_key = s, key
    return best


def choose_confirmation(op, hyp: Atom, bench: dict, seen: list[dict]) -> Optional[dict]:
    """A shape that tests whether the last surviving predicate is the whole story: the
    benchmark with one symbol the predicate does not mention changed (to 1, then 7), where
    the predicate says the kernel passes (symbols no probe has varied yet first).  For
    "shape != benchmark shape" (which mentions
    every symbol), the benchmark with one not yet varied symbol changed: if that passes,
    the kernel is not specific to the whole benchmark shape."""
    everything = hyp.rank == 4
    varied = {k for s in seen for k, v in s.items() if v != bench.get(k) and
              sum(1 for kk in s if s[kk] != bench.get(kk)) == 1}
    order = [x for x in op.symbols if x not in varied] + [x for x in op.symbols if x in varied]
    for sym in order:
        if everything:
            if sym in varied:
                continue
        elif sym in hyp.symbols:
            continue
        b = int(bench.get(sym, 0))
        for v in (1, 7, 3):
            if v == b:
                continue
            s = dict(bench)
            s[sym] = v
            if s in seen or (not everything and hyp.fn(s)):
                continue
            return s
    return None


def _shape_signature(ctx: Context, evidence, *, probe: bool = True) -> Diagnosis:
    op = ctx.op
    bench = evidence["benchmark"]
    results: list[ShapeResult] = list(evidence["results"])
    history = evidence.get("history", [])
    stale = evidence.get("stale") or []
    sig: dict[str, Any] = {}
    usable = [r for r in results if not r.stale]
    bres = [r for r in results if r.role == "benchmark"]
    hres = [r for r in results if r.role == "held-out"]
    b_pass = sum(r.passed for r in bres)
    h_pass = sum(r.passed for r in hres)
    sig["benchmark_pass_rate"] = f"{b_pass} of {len(bres)}"
    sig["heldout_pass_rate"] = f"{h_pass} of {len(hres)}"
    failing = [r for r in usable if not r.passed]
    predicate = None
    alternatives: list[str] = []
    probes: list[ShapeResult] = []
    if failing and any(r.passed for r in usable):
        budget = int(ctx.param("probes", 8)) if probe else 0
        seen = [r.shape for r in results]

        def obs():
            return [(r.shape, not r.passed) for r in usable + probes]
        atoms = build_atoms(op, seen, bench)
        cands = hypotheses(atoms, obs())
        confirmed: dict = {}
        while budget > 0 and cands:
            if len(cands) > 1:
                s = choose_probe(op, cands, bench, seen)
            else:
                n = confirmed.get(cands[0].text, 0)
                s = choose_confirmation(op, cands[0], bench, seen) if n < 2 else None
                confirmed[cands[0].text] = n + 1
            if s is None:
                break
            budget -= 1
            seen.append(s)
            probes.append(_run_shape(ctx, s, "probe", history, keys=("probe",)))
            cands = hypotheses(atoms, obs())
        if cands:
            cands.sort(key=lambda a: (a.rank, a.order))
            predicate = cands[0].text
            alternatives = [a.text for a in cands[1:4]]
        else:
            near = closest_predicate(atoms, obs())
            if near is not None and near[1] <= max(1, len(obs()) // 4):
                sig["closest_predicate"] = near[0].text
                sig["closest_misclassifies"] = near[1]
    failing_all = [r for r in usable + probes if not r.passed]
    sig["failing_shapes"] = [f"{r.describe(op)}: {r.reason}" for r in failing_all][:12]
    if probes:
        sig["probes"] = [f"{r.describe(op)}: {'pass' if r.passed else 'fail'}" for r in probes]
    if predicate:
        sig["predicate"] = predicate
        if alternatives:
            sig["also_consistent"] = alternatives
    sig["shape_table"] = [{"shape": r.describe(op), "role": r.role, "passed": r.passed,
                           "stale": r.stale, "reason": r.reason} for r in results + probes]
    parts = []
    if failing:
        head = (f"held-out shapes pass {h_pass} of {len(hres)} (benchmarked shape {b_pass} of "
                f"{len(bres)})")
        if predicate:
            head += f"; fails when {predicate}"
        elif not any(r.passed for r in usable):
            head += "; fails at every shape tested"
        elif "closest_predicate" in sig:
            head += (f"; no simple shape predicate separates the failures exactly (closest: "
                     f"fails when {sig['closest_predicate']}, wrong on "
                     f"{sig['closest_misclassifies']} shape(s))")
        else:
            head += "; no simple shape predicate separates the failures"
        shown = ", ".join(r.describe(op) for r in failing_all[:4])
        more = f" and {len(failing_all) - 4} more" if len(failing_all) > 4 else ""
        head += f" (failing: {shown}{more})"
        raised = [r for r in failing_all if r.failure is not None]
        if raised:
            head += f"; {len(raised)} of them raised or returned a wrong shape"
        parts.append(head)
    layouts = evidence.get("layouts") or []
    bad_layouts = [r for r in layouts if not r.passed and not r.stale]
    if layouts:
        sig["layouts"] = {r.layout: ("pass" if r.passed else "stale" if r.stale else "fail")
                          for r in layouts}
    if bad_layouts:
        sig["failing_layouts"] = [f"{r.layout}: {r.reason}" for r in bad_layouts]
        sig["shape_table"] = sig.get("shape_table", []) + [
            {"shape": r.describe(op), "role": r.role, "passed": r.passed, "stale": False,
             "reason": r.reason} for r in layouts]
        which = " and ".join(r.layout for r in bad_layouts)
        if all(r.failure is not None for r in bad_layouts):
            parts.append(f"fails when the inputs are {which} views of the same values (correct "
                         f"on contiguous inputs at {describe(op, bench)}): "
                         f"{bad_layouts[0].reason}")
        else:
            parts.append(f"wrong when the inputs are {which} views of the same values (correct "
                         f"on contiguous inputs at {describe(op, bench)}): the kernel reads "
                         f"memory as if every input were contiguous ({bad_layouts[0].reason})")
    if stale:
        sig["stale_calls"] = [{"call": s["call"], "reason": s["reason"],
                               "identical_to": s.get("identical_to")} for s in stale]
        ident = [s for s in stale if s.get("identical_to")]
        # a repeated call that raised says nothing of what its output is a function of
        sig["not_a_function_of_inputs"] = bool(ident) or any(s.get("digest") for s in stale)
        if ident:
            parts.append("output is not a function of the current inputs (identical to an "
                         f"earlier call's output: {ident[0]['call']} returned the output of "
                         f"{ident[0]['identical_to']})")
        elif sig["not_a_function_of_inputs"]:
            parts.append("output is not a function of the current inputs (wrong on a repeated "
                         f"call at a shape that passed: {stale[0]['call']}: {stale[0]['reason']})")
        else:
            where = "a shape that passed" if b_pass else "the benchmarked shape"
            parts.append(f"fails on a repeated call at {where}: {stale[0]['call']}: "
                         f"{stale[0]['reason']}")
    table = sig.pop("shape_table")
    return Diagnosis(summary="; ".join(parts), quantities=sig, details={"shapes": table})


@detector("shape_predicate",
          "held-out against benchmarked pass rate, the failing shapes, the simplest shape "
          "predicate that separates failing from passing shapes (a few probe shapes tell "
          "candidates apart and test the survivor), and outputs that are not a function of the "
          "current inputs")
def shape_predicate(ctx: Context, evidence) -> Diagnosis:
    return _shape_signature(ctx, evidence, probe=True)
