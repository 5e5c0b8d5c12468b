"""The error sweep of a recipe as an SVG: the measured error against the reduction
length beside each design's prediction (matplotlib, imported lazily)."""
from __future__ import annotations

import io


def sweep_svg(recipe) -> str:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(5.6, 3.4))
    ax = fig.add_subplot()
    ks = [p.length for p in recipe.sweep]
    ax.plot(ks, [max(p.measured, 1e-30) for p in recipe.sweep], "o-", color="black",
            label="measured", zorder=3)
    labels = list(recipe.sweep[0].predicted) if recipe.sweep else []
    for label, style in zip(labels, ("s--", "^:", "v-.")):
        ax.plot(ks, [max(p.predicted[label], 1e-30) for p in recipe.sweep], style,
                label=f"{label} design")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("reduction length K")
    ax.set_ylabel("rms |out - exact| / (|a| @ |b|)")
    ax.set_title(recipe.summary(), fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    return buf.getvalue()
