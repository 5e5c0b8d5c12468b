"""Plots for the HTML reports, as inline SVG.

matplotlib is optional (``pip install kcontract[plots]``) and imported only
here, only when a plot is drawn, with the Agg backend and without pyplot (no
global figure state).  Every function takes plain JSON data, returns a
:class:`Plot` or ``None`` when there is nothing to draw or a key it needs is
missing.

Plot kinds:

* ``error-vs-length``: error against the reduction length for a contract's cases,
  with the bound of the declared format drawn in.
* ``fingerprint``: the precision fingerprint, the candidate recipes a detector
  compared the kernel's outputs against, the match highlighted.
* ``recipe-sweep``: the recipe a failing C-PRC-01/04 recovered: its measured error
  against the reduction length beside each candidate design's prediction.
* ``effective-precision``: the accumulator's effective unit roundoff at each
  reduction length against the candidate formats' (declared one highlighted).
* ``sweep-map``: pass/fail over the shape sweep (shapes x input families).
* ``calibration``: the calibration matrix (contracts x baseline/bad/good).
"""
from __future__ import annotations

import io
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ..check.verdict import ROLES
from ._util import (as_float, case_rows, family_of, first, recipe_of, reduction_length,
                    shape_text)

PASS_COLOR = "#2e7d32"
FAIL_COLOR = "#c62828"
BOUND_COLOR = "#1565c0"
NEUTRAL = "#9e9e9e"


@dataclass
class Plot:
    kind: str
    title: str
    svg: str
    points: int  # how many data points it draws (tests and readers rely on it)
    caption: str = ""
    table: list = field(default_factory=list)  # the plotted numbers, as rows of text


def available() -> bool:
    """Whether matplotlib is installed (checked without importing it)."""
    if "matplotlib" in sys.modules:
        return True
    import importlib.util
    return importlib.util.find_spec("matplotlib") is not None


def _figure(width: float, height: float):
    import matplotlib
    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    from matplotlib.figure import Figure
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _svg(fig) -> str:
    import matplotlib
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "kcontract",
                                "font.size": 9}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = re.sub(r"^<\?xml[^>]*>\s*", "", text)
    text = re.sub(r"^<!DOCTYPE[^>]*>\s*", "", text, flags=re.S)
    # scale with the page: keep the viewBox, drop the fixed size
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1', text, count=1)
    return text.strip()


def _finite_pos(x: Optional[float]) -> bool:
    return x is not None and math.isfinite(x) and x > 0


# -- error against reduction length ------------------------------------------------

def error_vs_length(result: Mapping[str, Any], op: str, accumulate: str = "") -> Optional[Plot]:
    """Measured error at each case's worst element against the reduction length,
    with the allowed bound (the declared format's tolerance) drawn in.  Uses
    ``details["curve"]`` ({x, y, bound}) when a protocol supplies one, else the
    rows of ``details["cases"]``."""
    if not available():
        return None
    details = result.get("details") or {}
    pts: list[tuple[float, float, Optional[float], bool, str]] = []  # (n, err, bound, passed, family)
    curve = details.get("curve") if isinstance(details, Mapping) else None
    xlabel = "reduction length n"
    if isinstance(curve, Mapping) and isinstance(curve.get("x"), list):
        xs, ys = curve.get("x") or [], curve.get("y") or []
        bs = curve.get("bound") or [None] * len(xs)
        passed = curve.get("passed") or [None] * len(xs)
        series = curve.get("series") or curve.get("family") or [""] * len(xs)
        if isinstance(series, str):
            series = [series] * len(xs)
        xlabel = str(curve.get("xlabel") or xlabel)
        for x, y, b, p, f in zip(xs, ys, bs, passed, series):
            fx, fy = as_float(x), as_float(y)
            if fx is None or fy is None:
                continue
            fb = as_float(b)
            ok = bool(p) if p is not None else (fb is None or fy <= fb)
            pts.append((fx, fy, fb, ok, str(f or "")))
    else:
        for row in case_rows(result):
            # the engine records each case's reduction length; older runs: derive it here
            n = row.get("n") if row.get("n") is not None else reduction_length(op, row.get("shape"))
            err = as_float(first(row, ("measured", "max_abs")))
            if n is None or err is None:
                continue
            pts.append((float(n), err, as_float(row.get("allowed")), bool(row.get("passed")),
                        str(row.get("family") or "")))
    if not pts:
        return None
    shown = [p for p in pts if _finite_pos(p[1])]
    exact = [p for p in pts if p[1] == 0.0]
    nonfinite = [p for p in pts if not math.isfinite(p[1])]
    if not shown and not any(_finite_pos(p[2]) for p in pts):
        return None
    fig = _figure(6.4, 3.6)
    ax = fig.add_subplot()
    from matplotlib.lines import Line2D
    families = list(dict.fromkeys(p[4] for p in pts))
    handles = []
    palette = ["#1565c0", "#ef6c00", "#6a1b9a", "#00838f", "#5d4037", "#ad1457", "#558b2f"]
    for i, fam in enumerate(families):
        color = palette[i % len(palette)]
        mine = [p for p in pts if p[4] == fam]
        name = fam or "cases"
        per_n: dict[float, float] = {}
        for p in mine:
            if _finite_pos(p[2]):
                per_n[p[0]] = max(per_n.get(p[0], 0.0), p[2])
        if per_n:
            xs = sorted(per_n)
            ax.plot(xs, [per_n[x] for x in xs], "--", marker="_", markersize=14, color=color,
                    linewidth=1.2, zorder=2, gid=f"bound-{i}")
        ok = [p for p in mine if p[3] and _finite_pos(p[1])]
        bad = [p for p in mine if not p[3] and _finite_pos(p[1])]
        if ok:
            ax.scatter([p[0] for p in ok], [p[1] for p in ok], s=24, color=color, marker="o",
                       zorder=3, gid=f"measured-pass-{i}")
        if bad:
            ax.scatter([p[0] for p in bad], [p[1] for p in bad], s=46, color=color, marker="X",
                       edgecolors=FAIL_COLOR, linewidths=1.2, zorder=4,
                       gid=f"measured-fail-{i}")
        handles.append(Line2D([], [], color=color, linestyle="--", marker="o", markersize=4,
                              label=name))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("|error| at the worst element")
    title = "dashed: the allowed bound"
    if accumulate:
        title += f" (accumulate={accumulate})"
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    handles += [Line2D([], [], color="black", linestyle="", marker="o", markersize=4,
                       label="passes"),
                Line2D([], [], color="black", linestyle="", marker="X", markersize=6,
                       markeredgecolor=FAIL_COLOR, label="fails")]
    ax.legend(handles=handles, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7,
              frameon=False, title="input family", title_fontsize=7)
    notes = ["o passes, X fails; each case's error is at its worst element, against the "
             "tolerance there"]
    if exact:
        notes.append(f"{len(exact)} case(s) exact (error 0) not drawn on the log scale")
    if nonfinite:
        notes.append(f"{len(nonfinite)} case(s) with non-finite error not drawn")
    table = [["n", "family", "|error|", "allowed", "passes"]] + [
        [f"{p[0]:g}", p[4], f"{p[1]:.3g}", "–" if p[2] is None else f"{p[2]:.3g}",
         "yes" if p[3] else "no"] for p in sorted(pts)]
    return Plot("error-vs-length", "error against reduction length", _svg(fig), len(shown),
                "; ".join(notes), table)


# -- precision fingerprint ---------------------------------------------------------

_NAME_KEYS = ("recipe", "name", "label", "candidate", "format", "accumulate")
_VALUE_KEYS = ("distance", "error", "score", "residual", "rel_error", "mismatch", "match",
               "fit", "ratio", "value")


def _candidates(raw: Any) -> list[tuple[str, float]]:
    out: list[tuple[str, float]] = []
    if isinstance(raw, Mapping):
        for k, v in raw.items():
            f = as_float(v)
            if f is None and isinstance(v, Mapping):
                f = as_float(first(v, _VALUE_KEYS))
            if f is not None:
                out.append((str(k), f))
    elif isinstance(raw, (list, tuple)):
        for item in raw:
            if isinstance(item, Mapping):
                name = first(item, _NAME_KEYS)
                val = as_float(first(item, _VALUE_KEYS))
                if val is None:
                    val = next((as_float(v) for k, v in item.items()
                                if k not in _NAME_KEYS and as_float(v) is not None), None)
                if name is not None and val is not None:
                    out.append((str(name), val))
            elif isinstance(item, (list, tuple)) and len(item) >= 2:
                val = as_float(item[1])
                if val is not None:
                    out.append((str(item[0]), val))
    return out


_CANDIDATE_KEYS = (("candidates", "distance of the kernel's outputs from the recipe", False),
                   ("recipe_matches", "share of probes the recipe reproduces bit for bit", True),
                   ("matches", "share of probes the recipe reproduces bit for bit", True))


def fingerprint_data(result: Mapping[str, Any]) -> Optional[dict]:
    """The fingerprint a precision detector left (signature or details), or None."""
    sig = result.get("signature") or {}
    details = result.get("details") or {}
    sources = [s for s in (sig, details, details.get("fingerprint") if isinstance(details, Mapping)
                           else None, sig.get("fingerprint") if isinstance(sig, Mapping) else None)
               if isinstance(s, Mapping)]
    cands: list[tuple[str, float]] = []
    xlabel, higher_better = "", False
    recipe = bits = None
    for s in sources:
        for key, label, higher in _CANDIDATE_KEYS:
            if not cands:
                cands = _candidates(s.get(key))
                if cands:
                    xlabel, higher_better = label, higher
        recipe = recipe if recipe is not None else s.get("recipe")
        bits = bits if bits is not None else s.get("accumulator_bits")
    if not cands:
        return None
    names = [c[0] for c in cands]
    if recipe is not None and str(recipe) in names:
        chosen = [str(recipe)]
    else:  # the best-scoring candidates are the ones the detector settled on
        vals = [c[1] for c in cands]
        best = max(vals) if higher_better else min(vals)
        chosen = [n for n, v in cands if v == best]
    return {"candidates": cands, "recipe": None if recipe is None else str(recipe),
            "chosen": chosen, "accumulator_bits": bits, "xlabel": xlabel}


def fingerprint(result: Mapping[str, Any]) -> Optional[Plot]:
    data = fingerprint_data(result)
    if data is None or not available():
        return None
    cands = data["candidates"]
    fig = _figure(6.4, max(1.8, 0.32 * len(cands) + 1.2))
    ax = fig.add_subplot()
    names = [c[0] for c in cands]
    vals = [c[1] for c in cands]
    colors = [FAIL_COLOR if n in data["chosen"] else NEUTRAL for n in names]
    ys = list(range(len(cands)))
    ax.barh(ys, vals, color=colors, gid="candidates")
    ax.set_yticks(ys, labels=names)
    ax.tick_params(axis="y", labelsize=7)
    ax.invert_yaxis()
    pos = [v for v in vals if v > 0 and math.isfinite(v)]
    if pos and len(pos) == len(vals) and max(pos) / min(pos) > 100:
        ax.set_xscale("log")
    ax.set_xlabel(data["xlabel"])
    title = "candidate recipes (highlighted: the match)"
    if data["accumulator_bits"] is not None:
        title += f"; accumulator ≈ {data['accumulator_bits']} bits"
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    table = [["recipe", "score", "match"]] + [
        [n, f"{v:.3g}", "yes" if n in data["chosen"] else ""] for n, v in cands]
    caption = f"the kernel ran: {data['recipe']}" if data["recipe"] else ""
    return Plot("fingerprint", "precision fingerprint", _svg(fig), len(cands), caption, table)


def recipe_sweep(result: Mapping[str, Any]) -> Optional[Plot]:
    """The recovered recipe's error sweep (signature ``recovered_recipe.sweep``), drawn by
    :func:`kcontract.fingerprint.plot.draw_sweep`."""
    rec = recipe_of(result)
    sweep = rec.get("sweep") if rec is not None else None
    if not isinstance(sweep, list) or not sweep or not available():
        return None
    try:
        pts = [{"length": int(p["length"]), "measured": float(p["measured"]),
                "predicted": {str(k): float(v) for k, v in p["predicted"].items()},
                "bitwise": float(p.get("bitwise", 0.0))} for p in sweep]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    from ..fingerprint.plot import draw_sweep
    fig = _figure(6.4, 3.4)
    ax = fig.add_subplot()
    n = draw_sweep(ax, pts, str(rec.get("summary") or ""))
    ax.grid(True, which="both", alpha=0.3)
    labels = list(pts[0]["predicted"])
    table = [["K", "measured"] + [f"{lb} design" for lb in labels] + ["bit for bit"]] + [
        [str(p["length"]), f"{p['measured']:.3g}"] + [f"{p['predicted'][lb]:.3g}" for lb in labels]
        + [f"{p['bitwise']:.1%}"] for p in pts]
    caption = (f"recovered recipe: {rec.get('summary')}; the recovered design reproduces "
               f"{pts[-1]['bitwise']:.0%} of the outputs at K = {pts[-1]['length']} bit for bit")
    return Plot("recipe-sweep", "recovered recipe: error against the reduction length",
                _svg(fig), n, caption, table)


_REFERENCE_FORMATS = ("float64", "float32", "tf32", "float16", "bfloat16")


def effective_precision(result: Mapping[str, Any], accumulate: str = "") -> Optional[Plot]:
    """The accumulator's effective unit roundoff measured at each reduction length
    (signature ``u_by_length``), against the unit roundoff of the candidate formats."""
    sig = result.get("signature") or {}
    raw = sig.get("u_by_length") if isinstance(sig, Mapping) else None
    if not isinstance(raw, Mapping) or not available():
        return None
    pts = sorted((as_float(k), as_float(v)) for k, v in raw.items()
                 if as_float(k) is not None and _finite_pos(as_float(v)))
    if not pts:
        return None
    try:
        from ..formats import get_format
        refs = [(get_format(n).name, get_format(n).u) for n in _REFERENCE_FORMATS]
    except Exception:
        refs = []
    fig = _figure(6.4, 3.2)
    ax = fig.add_subplot()
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=FAIL_COLOR,
            label="measured (effective u)", gid="effective-u", zorder=3)
    lo = min(p[1] for p in pts) / 8
    hi = max(p[1] for p in pts) * 8
    for name, u in refs:
        if lo <= u <= hi or name == accumulate:
            declared = name == accumulate
            ax.axhline(u, color=BOUND_COLOR if declared else NEUTRAL,
                       linestyle="-" if declared else ":", linewidth=1.6 if declared else 1.0)
            ax.annotate(f"{name}{' (declared)' if declared else ''}  u=2^{int(round(math.log2(u)))}",
                        (1.0, u), xycoords=("axes fraction", "data"), fontsize=7,
                        ha="right", va="bottom", color=BOUND_COLOR if declared else "#616161")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("reduction length n")
    ax.set_ylabel("effective unit roundoff")
    ax.set_title("the accumulator's precision, measured against the candidate formats",
                 fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    table = [["n", "effective u"]] + [[f"{p[0]:g}", f"{p[1]:.3g}"] for p in pts]
    return Plot("effective-precision", "effective accumulator precision", _svg(fig), len(pts),
                "", table)


# -- pass/fail over the shape sweep ------------------------------------------------

def _short_label(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def sweep_map(result: Mapping[str, Any]) -> Optional[Plot]:
    rows = case_rows(result)
    if len(rows) < 2 or not available():
        return None
    shapes: list[str] = []
    families: list[str] = []
    cells: dict[tuple[str, str], list] = {}
    for row in rows:
        s = _short_label(shape_text(row.get("shape")) or str(row.get("probe") or "")
                         or str(row.get("case", "?")))
        if row.get("layout"):  # the same shape, its inputs as non-contiguous views
            s = f"{s} [{row['layout']}]"
        f = _short_label(str(row.get("family") or row.get("role") or "–"), 18)
        if s not in shapes:
            shapes.append(s)
        if f not in families:
            families.append(f)
        cell = cells.setdefault((s, f), [True, 0, 0])
        cell[0] = cell[0] and bool(row.get("passed"))
        cell[1] += int(as_float(row.get("mismatched")) or 0)
        cell[2] += int(as_float(row.get("total")) or 0)
    from matplotlib.colors import ListedColormap
    import numpy as np
    grid = np.full((len(shapes), len(families)), np.nan)
    for (s, f), (ok, _, _) in cells.items():
        grid[shapes.index(s), families.index(f)] = 1.0 if ok else 0.0
    fig = _figure(6.4, max(1.8, 0.3 * len(shapes) + 1.2))
    ax = fig.add_subplot()
    cmap = ListedColormap([FAIL_COLOR, PASS_COLOR]).with_extremes(bad="#eeeeee")
    ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto",
              interpolation="nearest", gid="sweep")
    for (s, f), (ok, mis, tot) in cells.items():
        label = "✓" if ok else (f"{mis}/{tot}" if tot else (f"✗ {mis}" if mis else "✗"))
        ax.text(families.index(f), shapes.index(s), label, ha="center", va="center",
                color="white", fontsize=7)
    ax.set_xticks(range(len(families)), labels=families)
    ax.set_yticks(range(len(shapes)), labels=shapes)
    ax.tick_params(axis="both", labelsize=7)
    ax.set_xlabel("input family")
    n_fail = sum(1 for c in cells.values() if not c[0])
    ax.set_title(f"pass/fail over the shape sweep: {len(cells) - n_fail} of {len(cells)} "
                 "cells pass", fontsize=9)
    table = [["shape", "family", "passes", "mismatched/total"]] + [
        [s, f, "yes" if ok else "no", f"{mis}/{tot}"] for (s, f), (ok, mis, tot) in cells.items()]
    return Plot("sweep-map", "pass/fail over the shape sweep", _svg(fig), len(cells), "", table)


# -- calibration matrix ------------------------------------------------------------



def calibration_matrix(cals: Sequence[Mapping[str, Any]]) -> Optional[Plot]:
    cals = [c for c in cals if isinstance(c, Mapping)]
    if not cals or not available():
        return None
    import numpy as np
    from matplotlib.colors import ListedColormap
    labels = [f"{c.get('contract', '')} {c.get('id', '')}".strip() for c in cals]
    grid = np.full((len(cals), len(ROLES)), np.nan)
    texts = {}
    for i, cal in enumerate(cals):
        cells = {str(cell.get("role")): cell for cell in (cal.get("cells") or [])
                 if isinstance(cell, Mapping)}
        for j, role in enumerate(ROLES):
            cell = cells.get(role)
            if cell is None:
                continue
            grid[i, j] = 1.0 if cell.get("sound") else 0.0
            basic = cell.get("basic")
            b = "basic ✓" if basic else ("basic ✗" if basic is False else "basic ?")
            texts[(i, j)] = f"{b} / {cell.get('verdict') or '–'}"
    fig = _figure(6.4, max(1.6, 0.3 * len(cals) + 1.1))
    ax = fig.add_subplot()
    cmap = ListedColormap([FAIL_COLOR, PASS_COLOR]).with_extremes(bad="#eeeeee")
    ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto",
              interpolation="nearest", gid="calibration")
    for (i, j), t in texts.items():
        ax.text(j, i, t, ha="center", va="center", color="white", fontsize=7)
    ax.set_xticks(range(len(ROLES)),
                  labels=["baseline\n(fails basic)", "bad\n(passes basic, violates)",
                          "good\n(passes both)"])
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(cals)), labels=labels)
    ax.tick_params(axis="both", labelsize=7)
    sound = sum(1 for c in cals if c.get("sound"))
    ax.set_title(f"{sound} of {len(cals)} contracts soundly calibrated", fontsize=9, pad=24)
    return Plot("calibration", "calibration matrix", _svg(fig), len(texts), "")


def plots_for(result: Mapping[str, Any], op: str, accumulate: str = "") -> list[Plot]:
    """Every plot that makes sense for one contract's result."""
    out = []
    details = result.get("details") or {}
    is_precision = family_of(str(result.get("contract", ""))) == "C-PRC"
    has_curve = isinstance(details, Mapping) and isinstance(details.get("curve"), Mapping)
    if is_precision or has_curve:
        p = error_vs_length(result, op, accumulate)
        if p:
            out.append(p)
    for p in (fingerprint(result), recipe_sweep(result), effective_precision(result, accumulate)):
        if p:
            out.append(p)
    p = sweep_map(result)
    if p:
        out.append(p)
    return out
