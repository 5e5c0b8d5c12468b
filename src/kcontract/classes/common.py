"""The generic measurement protocol, ``compare``: candidate against oracle.

Shapes x families x trials; each case's inputs are drawn from a seeded
generator, the kernel runs isolated, the float64 oracle runs here, and the
contract's tolerance and postcondition decide.  Family modules reuse
:func:`compare_cases` for their own protocols.
"""
from __future__ import annotations

import time
from typing import Iterable, Optional

import numpy as np

from ..check.engine import Comparison, Context
from ..language.registry import protocol
from ..ops.base import Lacks


def lacking(ctx: Context, lack: Lacks):
    """The explicit ``skipped`` verdict of a protocol whose op lacks a capability it
    needs: it names the capability (never a silent skip)."""
    return ctx.skipped(lack.message(ctx.op.name))


def compare_cases(ctx: Context, cases: Iterable, *, kwargs: Optional[dict] = None,
                  out_shape=None) -> tuple[list[Comparison], int]:
    """Run and compare every ``(case, inputs)``; returns (comparisons, skipped-by-precondition)."""
    comps: list[Comparison] = []
    skipped = 0
    for case, inputs in cases:
        ref, x = ctx.reference(inputs, kwargs)
        if not ctx.precondition_holds(case, inputs, ref, x):
            skipped += 1
            continue
        out = ctx.run(inputs, case, kwargs, out_shape=out_shape)
        comps.append(ctx.evaluate(case, inputs, out, ref, x=x, kwargs=kwargs))
    return comps, skipped


def worst(comps: list[Comparison]) -> Optional[Comparison]:
    """The failing comparison with the largest error-to-tolerance ratio."""
    failing = [c for c in comps if not c.passed]
    if not failing:
        return None
    return max(failing, key=badness)


def badness(c: Comparison) -> float:
    """How far a comparison is beyond its tolerance: measured / allowed at its worst
    element (inf for a non-finite error or a zero allowance)."""
    st = c.stats()
    m, a = st.get("measured"), st.get("allowed")
    if m is None or not np.isfinite(m):
        return np.inf
    return m / a if a else np.inf


def summarize(comps: list[Comparison]) -> list[dict]:
    """One row per case: what detectors and reports use."""
    rows = []
    for c in comps:
        st = c.stats()
        row = {"case": c.case.describe(), "shape": dict(c.case.shape), "family": c.case.family,
               "n": int(c.env["n"]) if c.env.get("n") is not None else None}
        if c.case.extra.get("layout"):
            row["layout"] = c.case.extra["layout"]
        rows.append({**row, "passed": c.passed, "mismatched": st["mismatched"], "total": st["total"],
                     "max_abs": st["max_abs"], "max_rel": st["max_rel"],
                     "measured": st.get("measured"), "allowed": st.get("allowed")})
    return rows


def verdict_from(ctx: Context, comps: list[Comparison], t0: float, *, skipped: int = 0,
                 evidence: Optional[dict] = None):
    """Pass, or a violation at the worst case with the detector's diagnosis."""
    rows = summarize(comps)
    details = {"cases": rows}
    if not comps:
        return ctx.skipped(f"no case met the precondition ({skipped} skipped)")
    bad = worst(comps)
    if bad is None:
        return ctx.passed(f"{len(comps)} cases conform", details=details,
                          seconds=time.perf_counter() - t0)
    ev = {"comparisons": comps, "rows": rows, "worst": bad}
    ev.update(evidence or {})
    diag = ctx.run_detector(ev)
    failing = sum(1 for c in comps if not c.passed)
    headline = diag.summary or ctx.contract.signature.summary
    message = f"{headline} ({failing} of {len(comps)} cases fail)"
    # a detector may name a more specific signature of the same class than the contract's
    # default (the fingerprint: operands substituted, the accumulator as declared)
    sig = dict(diag.quantities)
    v = ctx.violation(bad, message=message, quantities=sig,
                      code=f"{ctx.contract.cls}.{diag.code}" if diag.code else None)
    details.update(diag.details)
    return ctx.violated(v, signature=sig, details=details, seconds=time.perf_counter() - t0)


@protocol("compare", oracles=("fp64", "unfused"), params={"kwargs": (dict, {})},
          description="candidate against the float64 oracle over shapes x families x trials")
def compare(ctx: Context):
    t0 = time.perf_counter()
    comps, skipped = compare_cases(ctx, ctx.iter_cases())
    return verdict_from(ctx, comps, t0, skipped=skipped)
