"""Each class establishes its own cause before it reports: helpers the class protocols call.

- shape (C-CMP-03): a failing held-out shape is evidence of a shape fault only when the
  precision the kernel shows at the benchmarked shape does not explain it.  The kernel's
  normwise relative error at the benchmarked shape (``max |out - ref| / max |ref|``, reduction
  length ``n_b``) predicts, for a recursive reduction of length ``n``, an error of at most
  ``(n / n_b)`` times it (``gamma(n, u)`` grows linearly in ``n``), doubled for the spread of
  the worst element between two draws.  A held-out shape that errs no more is the benchmark's
  precision again (C-PRC-01's to judge), not a shape fault.  Errors as large as the results
  (``>= 1/8`` of them: fewer than three correct bits, no rounding recipe) explain nothing:
  that is a wrong kernel.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

#: normwise relative error from which an error is "as large as the results": no precision
GROSS = 0.125
#: the spread of the worst element between two draws of the same distribution
SPREAD = 2.0


def normwise_error(c) -> Optional[float]:
    """``max |out - ref| / max |ref|`` over the finite elements, or None (nothing finite)."""
    with np.errstate(all="ignore"):
        out, ref = np.asarray(c.out, np.float64), np.asarray(c.ref, np.float64)
        fin = np.isfinite(out) & np.isfinite(ref)
        if not fin.any() or (~np.isfinite(out) & np.isfinite(ref)).any():
            return None
        scale = float(np.max(np.abs(ref[fin])))
        err = float(np.max(np.abs(out[fin] - ref[fin])))
    if scale == 0:
        return None if err else 0.0
    return err / scale


def _length(c) -> float:
    n = (c.env or {}).get("n")
    try:
        return max(float(n), 1.0)
    except (TypeError, ValueError):
        return 1.0


def precision_explains(bench_comps, comps) -> Optional[str]:
    """Why the benchmarked shape's precision explains the failing ``comps`` of a held-out
    shape, or None when it does not (then they are evidence of a shape fault)."""
    failing_bench = [c for c in bench_comps if not c.passed]
    if not failing_bench or not comps:
        return None  # the benchmark passes (or raised): its precision explains no failure
    shown = [normwise_error(c) for c in bench_comps]
    if any(e is None for e in shown):
        return None
    worst_b = max(shown)
    if worst_b >= GROSS:
        return None
    n_b = max(_length(c) for c in bench_comps)
    for c in comps:
        if c.passed:
            continue
        e = normwise_error(c)
        if e is None or e > SPREAD * max(1.0, _length(c) / n_b) * worst_b:
            return None
    return (f"its normwise error is within what the benchmarked shape's "
            f"{worst_b:.2g} (reduction length {n_b:g}) predicts")


def shape_failures(bench, failing) -> tuple[list, list]:
    """Split failing held-out shape results into (evidence of a shape fault, explained by the
    benchmarked shape's precision).  ``bench`` and each of ``failing`` carry ``comps``,
    ``failure`` (a raise or wrong shape) and ``role``."""
    keep, explained = [], []
    for r in failing:
        if r.role == "benchmark" or r.failure is not None:
            keep.append(r)
            continue
        why = precision_explains(bench.comps, r.comps)
        (explained if why else keep).append(r)
    if keep and all(r.role == "benchmark" for r in keep) and explained:
        # the benchmarked shape fails and every held-out failure is its precision again
        keep = [r for r in keep if r.role != "benchmark"] if _bench_precision(bench) else keep
    return keep, explained


def _bench_precision(bench) -> bool:
    shown = [normwise_error(c) for c in bench.comps]
    return bool(shown) and all(e is not None and e < GROSS for e in shown)


def precision_message(bench, explained, op) -> str:
    """The shape contract's verdict text when every failure is the benchmark's precision."""
    shapes = ", ".join(r.describe(op) for r in explained[:4]) + (
        f" and {len(explained) - 4} more" if len(explained) > 4 else "")
    return (f"no shape-specific failure: the benchmarked shape fails too, and the held-out "
            f"shapes ({shapes}) err no more than its precision predicts; the precision is "
            f"for C-PRC-01 to judge")


def exceptional_comparison(ctx, cmp, policy: str):
    """C-EXC-01 judges exceptional semantics, not precision: under ``propagate`` and ``raise``
    an element where the output and the oracle are both finite, and the oracle well inside the
    format's range, is not this class's evidence however large its error (C-PRC-01 and the
    op's other contracts judge it).  Under ``mask`` the finite values are the policy's result
    and stay judged.  An op whose output is not floating point (top-k's indices) has no
    precision to blame: a wrong finite output there is the exceptional input's doing."""
    if policy == "mask" or cmp.passed:
        return cmp
    from dataclasses import replace
    out_fmt = ctx.op.output_format(ctx.dtype)
    if np.dtype(out_fmt.dtype).kind not in "fV":
        return cmp
    fmax = out_fmt.max
    with np.errstate(all="ignore"):
        out, ref = np.asarray(cmp.out, np.float64), np.asarray(cmp.ref, np.float64)
        finite = np.isfinite(out) & np.isfinite(ref) & (np.abs(ref) < fmax / 2) \
            & (np.abs(out) < fmax / 2)
    if not finite.any():
        return cmp
    ok = np.asarray(cmp.ok, dtype=bool) | np.broadcast_to(finite, np.shape(cmp.ok))
    return replace(cmp, ok=ok)
