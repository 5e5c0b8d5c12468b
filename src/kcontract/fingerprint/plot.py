"""The error sweep of a recipe as an SVG: the measured error against the reduction
length beside each design's prediction (matplotlib, imported lazily).

:func:`draw_sweep` draws on a given axes from the sweep's JSON form (what a recipe's
``as_dict()["sweep"]`` and a C-PRC-01/04 violation's ``recovered_recipe.sweep`` hold),
so the HTML report draws the same plot as ``kcontract fingerprint --plot``."""
from __future__ import annotations

import io

STYLES = ("s--", "^:", "v-.", "D--")


def _point(p) -> dict:
    return p if isinstance(p, dict) else p.as_dict()


def draw_sweep(ax, sweep, title: str = "") -> int:
    """Measured error (black) and each design's prediction against K on ``ax``; returns
    the number of points drawn."""
    pts = [_point(p) for p in sweep]
    ks = [p["length"] for p in pts]
    ax.plot(ks, [max(float(p["measured"]), 1e-30) for p in pts], "o-", color="black",
            label="measured", zorder=3, gid="measured")
    labels = list(pts[0]["predicted"]) if pts else []
    for i, label in enumerate(labels):
        ax.plot(ks, [max(float(p["predicted"][label]), 1e-30) for p in pts],
                STYLES[i % len(STYLES)], label=f"{label} design", gid=f"design-{i}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("reduction length K")
    ax.set_ylabel("rms |out - exact| / (|a| @ |b|)")
    if title:
        ax.set_title(title, fontsize=8)
    ax.legend(fontsize=8)
    return len(pts) * (1 + len(labels))


def sweep_svg(recipe) -> str:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(5.6, 3.4))
    ax = fig.add_subplot()
    draw_sweep(ax, recipe.sweep, recipe.summary())
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    return buf.getvalue()
