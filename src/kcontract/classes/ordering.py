"""The ordering and determinism family (C-ORD-01..03): protocols and signature detectors.

Protocols
    ``reorder``  (C-ORD-01) the kernel on its inputs and on copies whose reduction
                 index is permuted (x's last axis for sum; a's columns together with
                 b's rows for matmul): the exact result is unchanged, only the order the
                 kernel meets the terms in differs.  Every schedule is compared with the
                 oracle, and binds ``reorder_spread`` -- the elementwise distance between
                 the extreme schedules -- which two correct schedules keep within twice
                 the order-independent bound.
    ``repeat``   (C-ORD-02) the same inputs (fresh copies) several times in a row; binds
                 ``first`` (and ``ref``) to the first run's output, float64.
    ``batch``    (C-ORD-03) some probe rows computed alone (twice: a control for
                 run-to-run non-determinism), then inside batches of other sizes and
                 compositions (other companion rows, other positions); binds ``alone``
                 (and ``ref``) to the probe rows' alone output, float64.

Detectors
    ``reorder_spread``    (C-ORD-01) spread across reduction orders and distance from the
                          oracle, each against the bound.
    ``run_to_run``        (C-ORD-02) which elements differ between runs and their pattern
                          (whole rows, whole columns, dense, scattered) and how far: in
                          ulp, and against the order-independent bound (within it: the
                          same values combined in another order; beyond it: the data
                          itself changed).
    ``batch_dependence``  (C-ORD-03) which probe rows change bits, in batches of which
                          sizes, and whether the composition of the batch matters.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Optional

import numpy as np

from ..check.engine import Comparison, Context
from ..errors import UsageError
from ..formats import ulp
from ..language.registry import detector, protocol
from ..ops import upcast
from .common import verdict_from

# -- helpers ----------------------------------------------------------------------------------

#: per op: the input axes that carry the reduction index, and the output axis that
#: carries it too (None: the output does not depend on the index's order at all)
REORDER_AXES: dict[str, tuple[dict, Optional[int]]] = {
    "sum": ({"x": -1}, None),
    "matmul": ({"a": -1, "b": -2}, None),
    "linear_gelu": ({"x": -1, "w": -2}, None),
    "attention": ({"k": -2, "v": -2}, None),
    "softmax": ({"x": -1}, -1),
    "layernorm": ({"x": -1, "weight": -1, "bias": -1}, -1),
}


def _f64(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _fresh(inputs) -> dict:
    return {k: np.array(v, copy=True) for k, v in inputs.items()}


def _bits(a) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def bits_differ(a, b) -> np.ndarray:
    """Elementwise: the two outputs (same format) do not have the same bits."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape or a.dtype.itemsize not in (1, 2, 4, 8):
        return ~_same(_f64(a), _f64(b))
    view = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return np.ascontiguousarray(a).view(view) != np.ascontiguousarray(b).view(view)


def _same(a, b) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        eq = (a == b) & (np.signbit(a) == np.signbit(b))
    return eq | (np.isnan(a) & np.isnan(b))


def _ulp_distance(ctx: Context, out, base) -> float:
    """Largest |out - base| in units of the last place of base, in the output format."""
    o, b = _f64(out), _f64(base)
    fmt = ctx.op.output_format(ctx.dtype)
    with np.errstate(all="ignore"):
        d = np.abs(o - b) / ulp(np.where(b == 0, fmt.smallest_subnormal, b), fmt)
    d = d[np.isfinite(d)]
    return float(np.max(d)) if d.size else float("inf")


def _as_2d(mask: np.ndarray) -> np.ndarray:
    """An output-shaped mask as rows x columns: the last axis is the columns; a 1-D
    output (one value per row, e.g. sum) is one column."""
    m = np.asarray(mask, dtype=bool)
    if m.ndim == 0:
        return m.reshape(1, 1)
    if m.ndim == 1:
        return m.reshape(-1, 1)
    return m.reshape(-1, m.shape[-1])


def diff_pattern(mask) -> dict:
    """The pattern of the elements that differ (``mask`` output-shaped, True where an
    element differs), with the output viewed as rows x last axis: ``none``,
    ``everything``, ``rows`` (some rows change across their whole width while other
    rows keep every bit: a row's reduction combined its partial results in another
    order, as with split-K or atomics; a 1-D output is one value per row),
    ``columns`` (the same, by columns), ``dense`` or ``scattered``."""
    d = _as_2d(mask)
    rows, cols = d.shape
    n = int(np.count_nonzero(d))
    info = {"differing": n, "total": int(d.size), "rows": rows, "columns": cols}
    if n == 0:
        return dict(info, pattern="none", rows_affected=0, columns_affected=0)
    r_hit, c_hit = d.any(axis=1), d.any(axis=0)
    nr, nc = int(np.count_nonzero(r_hit)), int(np.count_nonzero(c_hit))
    row_fill = float(d[r_hit].mean())
    col_fill = float(d[:, c_hit].mean())
    info.update(rows_affected=nr, columns_affected=nc, row_fill=round(row_fill, 3),
                column_fill=round(col_fill, 3))
    if n == d.size:
        pattern = "everything"
    elif cols == 1:
        pattern = "rows"
    elif nc == cols and row_fill >= ROW_FILL and _structured(rows - nr, n / d.size, cols):
        pattern = "rows"
    elif nr == rows and col_fill >= ROW_FILL and _structured(cols - nc, n / d.size, rows):
        pattern = "columns"
    elif n >= 0.2 * d.size:
        pattern = "dense"
    else:
        pattern = "scattered"
    info["pattern"] = pattern
    return info


def _structured(untouched: int, density: float, width: int) -> bool:
    """Rows (of ``width`` elements) left untouched are evidence of a row structure only
    when scattered differences of the same density would leave far fewer of them:
    at least 3, and 10x the expected ``count * (1 - density) ** width``."""
    if untouched < 3:
        return False
    expected = (untouched + 1) * (1.0 - density) ** width
    return untouched >= 10 * expected


#: share of a touched row's elements that must differ for "whole rows": a row whose
#: normaliser or partial sums changed moves most of its elements by an ulp, some of
#: them round back to the same bits
ROW_FILL = 0.25


def _group_key(case) -> tuple:
    return (tuple(sorted(case.shape.items())), case.family, case.trial)


# -- C-ORD-01: reduction order ----------------------------------------------------------------

def _reorder_axes(ctx: Context) -> tuple[dict, Optional[int]]:
    if ctx.op.name not in REORDER_AXES:
        raise UsageError(f"protocol reorder does not know the reduction index of op "
                         f"{ctx.op.name!r}; it supports {', '.join(REORDER_AXES)}")
    return REORDER_AXES[ctx.op.name]


def schedules(n: int, count: int, rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    """``count`` orders of a reduction index of length n: as given, reversed, then
    random permutations (seeded)."""
    out = [("identity", np.arange(n)), ("reversed", np.arange(n)[::-1].copy())]
    for i in range(max(0, count - 2)):
        out.append((f"random{i + 1}", rng.permutation(n)))
    return out[:max(2, count)] if n > 1 else out[:1]


@protocol("reorder", params={"orders": (int, 4), "kwargs": (dict, {})},
          provides=("reorder_spread",),
          description="the kernel on its inputs and on copies whose reduction index is "
                      "permuted (the exact result is unchanged); each order against the "
                      "oracle, and reorder_spread: max - min over the orders, elementwise")
def reorder(ctx: Context):
    t0 = time.perf_counter()
    axes, out_axis = _reorder_axes(ctx)
    if ctx.op.name == "attention" and ctx.kwargs().get("causal"):
        return ctx.skipped("permuting the keys of causal attention changes the result: "
                           "reorder applies to causal=False only")
    comps: list[Comparison] = []
    groups: list[dict] = []
    skipped = 0
    for case, inputs in ctx.iter_cases():
        ref, x = ctx.reference(inputs)
        if not ctx.precondition_holds(case, inputs, ref, x):
            skipped += 1
            continue
        first = next(iter(axes))
        n = int(np.shape(inputs[first])[axes[first]])
        rng = ctx.rng("reorder", case.describe())
        outs = []
        for label, perm in schedules(n, int(ctx.param("orders")), rng):
            permuted = {k: (np.take(v, perm, axis=axes[k]) if k in axes else v)
                        for k, v in inputs.items()}
            out = ctx.run(permuted, replace(case, extra={"order": label}))
            if out_axis is not None:
                out = np.take(out, np.argsort(perm), axis=out_axis)
            outs.append((label, out))
        stack = np.stack([_f64(o) for _, o in outs])
        with np.errstate(invalid="ignore"):
            spread = np.max(stack, axis=0) - np.min(stack, axis=0)
        for label, out in outs:
            c = ctx.case(case.shape, case.family, case.trial, order=label)
            comps.append(ctx.evaluate(c, inputs, out, ref, x=x,
                                      extra={"reorder_spread": spread}))
        groups.append({"case": case.describe(), "orders": [lbl for lbl, _ in outs]})
    return verdict_from(ctx, comps, t0, skipped=skipped, evidence={"groups": groups})


def _ratio(num: np.ndarray, den) -> tuple[float, Optional[tuple]]:
    """max(num / den) over the finite elements, and where."""
    num = np.asarray(num, dtype=np.float64)
    den = np.broadcast_to(np.asarray(den, dtype=np.float64), num.shape)
    with np.errstate(all="ignore"):
        r = np.where(den > 0, num / den, np.where(num > 0, np.inf, 0.0))
    r = np.where(np.isnan(r), np.inf, r)
    if r.size == 0:
        return 0.0, None
    i = int(np.argmax(r))
    return float(r.reshape(-1)[i]), tuple(int(k) for k in np.unravel_index(i, r.shape))


@detector("reorder_spread", "spread across reduction orders and distance from the oracle, "
                            "each against the order-independent bound")
def reorder_spread(ctx: Context, evidence) -> dict:
    comps: list[Comparison] = list(evidence.get("comparisons") or [])
    best = {"spread_ratio": 0.0, "error_ratio": 0.0}
    where = {}
    orders_by_group: dict = {}
    for c in comps:
        if c.tol is None:
            continue
        orders_by_group.setdefault(_group_key(c.case), set()).add(c.case.extra.get("order"))
        spread = np.asarray(c.env.get("reorder_spread", 0.0), dtype=np.float64)
        sr, si = _ratio(np.broadcast_to(spread, c.out.shape), 2.0 * c.tol)
        er, ei = _ratio(c.error(), c.tol)
        if sr > best["spread_ratio"]:
            best["spread_ratio"] = sr
            tol = np.broadcast_to(c.tol, c.out.shape)
            where["spread"] = {"spread": float(np.broadcast_to(spread, c.out.shape)[si]),
                               "bound": float(2.0 * tol[si]), "index": si,
                               "case": c.case.describe()}
        if er > best["error_ratio"]:
            best["error_ratio"] = er
            where["error"] = {"order": c.case.extra.get("order"), "index": ei}
    orders = max((len(v) for v in orders_by_group.values()), default=0)
    sig = {"orders": orders, "spread_ratio": _round(best["spread_ratio"]),
           "error_ratio": _round(best["error_ratio"])}
    if "spread" in where:
        sig["max_spread"] = where["spread"]["spread"]
        sig["spread_bound"] = where["spread"]["bound"]
    if "error" in where:
        sig["worst_order"] = where["error"]["order"]
    sr, er = best["spread_ratio"], best["error_ratio"]
    if sr > 1:
        s = (f"results of {orders} reduction orders lie up to {sig['max_spread']:.3g} apart, "
             f"{sr:.3g}x the {sig['spread_bound']:.3g} two correct schedules can differ by "
             f"(2x the order-independent bound); distance from the oracle up to {er:.3g}x "
             f"the bound")
        sig["finding"] = "spread"
    elif er > 1:
        s = (f"every reduction order is off by up to {er:.3g}x the order-independent bound "
             f"while the orders agree within it (spread {sr:.3g}x of 2x the bound): a "
             f"systematic error, not only an ordering one")
        sig["finding"] = "distance"
    else:
        s = "within the order-independent bound"
        sig["finding"] = "none"
    sig["summary"] = s
    return sig


def _round(v: float) -> float:
    return float(f"{v:.4g}") if np.isfinite(v) else float(v)


# -- C-ORD-02: run-to-run determinism ---------------------------------------------------------

@protocol("repeat", params={"runs": (int, 4), "kwargs": (dict, {})},
          provides=("first",),
          description="the same inputs (fresh copies) run several times in a row; first "
                      "(and ref): the first run's output")
def repeat(ctx: Context):
    t0 = time.perf_counter()
    runs = max(2, int(ctx.param("runs")))
    comps: list[Comparison] = []
    groups: list[dict] = []
    skipped = 0
    for case, inputs in ctx.iter_cases():
        if not ctx.precondition_holds(case, inputs):
            skipped += 1
            continue
        outs = [ctx.run(_fresh(inputs), case) for _ in range(runs - 1)]
        outs.append(ctx.run_in_fresh_process(_fresh(inputs), case))  # another process too
        first = _f64(outs[0])
        x = upcast(inputs)
        for r, out in enumerate(outs[1:], start=2):
            c = ctx.case(case.shape, case.family, case.trial, run=r)
            comps.append(ctx.evaluate(c, inputs, out, first, x=x, extra={"first": first}))
        groups.append({"case": case.describe(), "outputs": outs})
    return verdict_from(ctx, comps, t0, skipped=skipped, evidence={"groups": groups})


def _pattern_words(p: dict) -> str:
    pat = p["pattern"]
    if pat == "rows":
        if p["columns"] == 1:
            what = (f"{p['rows_affected']} of {p['rows']} row results differ (each one row's "
                    f"whole reduction)")
        else:
            what = (f"whole rows differ ({p['rows_affected']} of {p['rows']} rows, "
                    f"{p['row_fill']:.0%} of their elements; the other rows keep every bit)")
        return what + ": a split-K / atomics-like row pattern"
    if pat == "columns":
        return (f"whole columns differ ({p['columns_affected']} of {p['columns']} columns, "
                f"{p['column_fill']:.0%} of their elements)")
    if pat == "everything":
        return f"every element differs ({p['total']})"
    if pat == "dense":
        return (f"{p['differing']} of {p['total']} elements differ, spread over "
                f"{p['rows_affected']} of {p['rows']} rows")
    return (f"scattered elements differ ({p['differing']} of {p['total']}, in "
            f"{p['rows_affected']} of {p['rows']} rows)")


def rounding_scale(ctx: Context, cmp: Comparison) -> np.ndarray:
    """How far two correct evaluations of the same inputs may lie apart, elementwise,
    halved: the order-independent bound gamma(n, u(accumulate)) * mag plus an ulp of
    the output (n = 1 for ops without a reduction)."""
    from ..formats import gamma
    ref = cmp.ref
    n = max(1, int(cmp.env.get("n", 1) or 1))
    mag = np.asarray(cmp.env.get("mag", np.abs(ref)), dtype=np.float64)
    fmt = ctx.op.output_format(ctx.dtype)
    with np.errstate(all="ignore"):
        return (gamma(n, ctx.claims.accumulate.u) * np.broadcast_to(mag, ref.shape)
                + ulp(np.where(ref == 0, fmt.smallest_subnormal, ref), fmt))


@detector("run_to_run", "elements that differ between repeated runs, their pattern (rows, "
                        "columns, scattered) and their distance (ulp, and against the rounding "
                        "a correct evaluation is allowed)")
def run_to_run(ctx: Context, evidence) -> dict:
    groups = list(evidence.get("groups") or [])
    comps: list[Comparison] = list(evidence.get("comparisons") or [])
    worst: Optional[dict] = None
    for g in groups:
        outs = g["outputs"]
        first = outs[0]
        masks = [bits_differ(o, first) for o in outs[1:]]
        if not masks:
            continue
        p = diff_pattern(np.logical_or.reduce(masks))
        # a structure (rows, columns) shows best in one run against the first: the union
        # of several runs fills the rows that kept their bits in one of them
        for r, m in enumerate(masks, start=2):
            pr = diff_pattern(m)
            if pr["pattern"] in ("rows", "columns") and p["pattern"] not in ("rows", "columns"):
                p = dict(pr, run=r)
                break
        p["case"] = g["case"]
        p["runs"] = len(outs)
        p["runs_differing"] = [r for r, m in enumerate(masks, start=2) if m.any()]
        p["distinct_results"] = len({_bits(o) for o in outs})
        p["max_ulp"] = max(_ulp_distance(ctx, o, first) for o in outs[1:])
        ratio = 0.0
        for c in comps:
            if c.case.describe().startswith(g["case"]) and not c.passed:
                ratio = max(ratio, _ratio(c.error(), rounding_scale(ctx, c))[0])
        p["rounding_ratio"] = ratio
        if worst is None or len(p["runs_differing"]) and p["differing"] > worst["differing"]:
            worst = p
    if worst is None or not worst["runs_differing"]:
        return {"pattern": "none", "summary": "every run gave the same bits"}
    mu, ratio = worst["max_ulp"], worst["rounding_ratio"]
    if ratio <= 2:
        depth = "rounding"
        how = (f"by at most {mu:.3g} ulp, within what rounding allows a correct evaluation "
               f"({ratio:.2g}x the order-independent bound): "
               + ("the same values combined in another order" if ctx.op.reduction else
                  "another evaluation path or a randomised rounding"))
    else:
        depth = "data"
        how = (f"by up to {mu:.3g} ulp, {ratio:.3g}x what reordering or rounding can explain: "
               f"the data itself changed (stale or cached values, reduced-precision copies, "
               f"a race on data)")
    sig = {k: worst[k] for k in ("pattern", "differing", "total", "rows_affected", "rows",
                                 "columns_affected", "columns", "runs", "runs_differing",
                                 "distinct_results") if k in worst}
    sig["max_ulp"] = _round(mu)
    sig["rounding_ratio"] = _round(ratio)
    sig["depth"] = depth
    where = f"run {worst['run']} against run 1: " if "run" in worst else ""
    sig["summary"] = (f"{worst['distinct_results']} distinct results in {worst['runs']} runs "
                      f"of identical inputs; {where}{_pattern_words(worst)}; they differ {how}")
    return sig


# -- C-ORD-03: batch and partition invariance -----------------------------------------------

def _row_axis(ctx: Context, sub_inputs: dict) -> int:
    """The output axis that carries the op's rows (where ``output_rows`` selects)."""
    shape = tuple(ctx.op.output_shape(ctx.op.solve_shape(sub_inputs)))
    piece = np.shape(ctx.op.output_rows(np.zeros(shape, dtype=np.uint8), [0]))
    for i, (a, b) in enumerate(zip(shape, piece)):
        if a != b:
            return i
    return 0


def arrangements(probe: list, others: list, size: int, rng: np.random.Generator,
                 ) -> dict[str, list[list[int]]]:
    """Batches of ``size`` rows that contain every probe row, two ways: ``A`` probe rows
    in order (filled up with the first companions), ``B`` probe rows shuffled among
    other companions at shuffled positions.  Batches keep ``size`` rows where enough
    companion rows exist."""
    out = {}
    for name in ("A", "B"):
        p = list(probe) if name == "A" else [int(i) for i in rng.permutation(probe)]
        comp = list(others) if name == "A" else [int(i) for i in rng.permutation(others)]
        batches = []
        per = min(size, len(p))
        for k in range(0, len(p), per):
            rows = p[k:k + per]
            need = size - len(rows)
            fill, comp = comp[:need], comp[need:]
            if len(fill) < need:  # recycle companions already used in other batches
                pool = [r for r in others if r not in fill]
                fill += pool[:need - len(fill)]
            rows = rows + fill
            if name == "B":
                rows = [int(i) for i in rng.permutation(rows)]
            batches.append(rows)
        out[name] = batches
    return out


@protocol("batch", params={"batch_sizes": (list, [1, 3, 16, 64]), "probes": (int, 8),
                           "kwargs": (dict, {})},
          provides=("alone",),
          description="probe rows computed alone, then inside batches of other sizes and "
                      "compositions; alone (and ref): the probe rows computed one by one")
def batch(ctx: Context):
    t0 = time.perf_counter()
    sizes = sorted({int(b) for b in ctx.param("batch_sizes") or [] if int(b) >= 1})
    comps: list[Comparison] = []
    skipped = 0
    dropped: set = set()
    unstable: set = set()
    row_axis = 0
    probes_by_case: dict = {}
    for case, inputs in ctx.iter_cases():
        if not ctx.precondition_holds(case, inputs):
            skipped += 1
            continue
        total = int(ctx.op.num_rows(case.shape))
        dropped |= {b for b in sizes if b > total}
        P = max(1, min(int(ctx.param("probes")), total))
        rng = ctx.rng("batch", case.describe())
        order = [int(i) for i in rng.permutation(total)]
        probe, others = sorted(order[:P]), order[P:]
        probes_by_case[case.describe()] = probe
        sub = ctx.op.select_rows(inputs, probe)
        row_axis = _row_axis(ctx, sub) if P > 1 else 0

        def run_rows(rows, label):
            out = ctx.run(_fresh(ctx.op.select_rows(inputs, rows)),
                          replace(case, extra={"batch": label}))
            return {r: ctx.op.output_rows(out, [j]) for j, r in enumerate(rows)}

        pieces, again = {}, {}
        for r in probe:
            pieces.update(run_rows([r], "alone"))
        alone = np.concatenate([pieces[r] for r in probe], axis=row_axis)
        # control: the same rows alone once more; a row that changes here is not
        # batch-dependent but run-to-run non-deterministic (C-ORD-02)
        for r in probe:
            again.update(run_rows([r], "alone-again"))
        unstable |= {r for r in probe if bits_differ(again[r], pieces[r]).any()}
        alone64 = _f64(alone)
        x = upcast(sub)
        for size in sizes:
            if size == 1 or size > total:
                continue
            for name, batches in arrangements(probe, others, size, rng).items():
                got = {}
                for rows in batches:
                    got.update({r: v for r, v in run_rows(rows, f"{size}{name}").items()
                                if r in probe})
                out = np.concatenate([got[r] for r in probe], axis=row_axis)
                c = ctx.case(case.shape, case.family, case.trial, batch=size, arrangement=name)
                comps.append(ctx.evaluate(c, sub, out, alone64, x=x,
                                          extra={"alone": alone64}))
    if not comps and not skipped:
        return ctx.skipped(f"no batch size fits the rows of the shapes checked "
                           f"(batch sizes {sizes})")
    return verdict_from(ctx, comps, t0, skipped=skipped,
                        evidence={"row_axis": row_axis, "probes": probes_by_case,
                                  "sizes": sizes, "dropped": sorted(dropped),
                                  "unstable": sorted(unstable)})


@detector("batch_dependence", "rows whose bits change with the batch: which rows, in "
                              "batches of which sizes, and whether the composition matters")
def batch_dependence(ctx: Context, evidence) -> dict:
    comps: list[Comparison] = list(evidence.get("comparisons") or [])
    axis = int(evidence.get("row_axis", 0))
    probes = evidence.get("probes") or {}
    by_size: dict[int, dict] = {}
    max_ulp = 0.0
    for c in comps:
        size = int(c.case.extra.get("batch", 0))
        arr = c.case.extra.get("arrangement", "")
        bad = ~np.asarray(c.ok, dtype=bool)
        other = tuple(i for i in range(bad.ndim) if i != axis)
        rows_bad = np.any(bad, axis=other) if other else bad
        probe = probes.get(_case_text(c.case), [])
        idx = [int(probe[i]) if i < len(probe) else int(i)
               for i in np.flatnonzero(np.atleast_1d(rows_bad))]
        e = by_size.setdefault(size, {"rows": set(), "arrangements": {}, "probed": 0})
        e["rows"].update(idx)
        e["arrangements"][arr] = e["arrangements"].get(arr, False) or bool(idx)
        e["probed"] = max(e["probed"], int(np.size(rows_bad)))
        if idx:
            max_ulp = max(max_ulp, _ulp_distance(ctx, c.out, c.ref))
    differ = sorted(s for s, e in by_size.items() if e["rows"])
    agree = sorted(s for s, e in by_size.items() if not e["rows"])
    rows = sorted(set().union(*(by_size[s]["rows"] for s in differ))) if differ else []
    probed = max((e["probed"] for e in by_size.values()), default=0)
    composition = sorted(s for s in differ if len(set(by_size[s]["arrangements"].values())) > 1)
    unstable = [int(r) for r in evidence.get("unstable") or []]
    sig = {"batch_sizes": differ, "agreeing_sizes": agree, "rows": rows,
           "rows_affected": len(rows), "rows_probed": probed,
           "composition_sizes": composition, "max_ulp": _round(max_ulp),
           "nondeterministic": bool(unstable)}
    if evidence.get("dropped"):
        sig["sizes_not_run"] = list(evidence["dropped"])
    if not differ:
        sig["summary"] = "every probe row keeps its bits in every batch"
        return sig
    s = (f"row bits depend on the batch: {len(rows)} of {probed} probe rows differ from "
         f"their alone result in batches of {_join(differ)}")
    if agree:
        s += f" (in batches of {_join(agree)} they keep their bits)"
    if composition:
        s += (f"; at size {_join(composition)} only one arrangement differs: the "
              f"companion rows or positions matter, not only the size")
    s += f"; up to {max_ulp:.3g} ulp"
    if unstable:
        s += (f"; {len(unstable)} probe rows also change between two runs alone: the kernel is "
              f"not run-to-run deterministic either (C-ORD-02), so part of this is not the "
              f"batch")
    sig["summary"] = s
    return sig


def _case_text(case) -> str:
    base = replace(case, extra={})
    return base.describe()


def _join(xs) -> str:
    xs = [str(x) for x in xs]
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]
