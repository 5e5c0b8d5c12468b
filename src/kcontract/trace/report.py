"""A trace comparison as text (the terminal) and as a self-contained HTML page, with the
divergence growth through the model as an inline SVG plot (matplotlib, optional)."""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from ..report import plots as _plots
from ..report.html import badge, esc, figure, kv, page, table


def _pct(share: Mapping[str, Any]) -> str:
    return f"{share['percent']:.1f} % ({share['agree']} of {share['total']})"


def agreement_text(ag: Mapping[str, Any]) -> str:
    if ag.get("kind") == "language model":
        return (f"greedy next-token agreement {_pct(ag['next_token'])}; top-1 agreement over "
                f"every position {_pct(ag['top1'])}")
    return (f"B against A: max |error| {ag['max_abs']:.3g}, max relative error "
            f"{ag['max_rel']:.3g}, normwise relative error {ag['normwise_rel']:.3g}")


def summary_lines(data: Mapping[str, Any]) -> list[str]:
    """The comparison in a few lines: agreement, where each trial parts, who violates what."""
    a, b = data["a"], data["b"]
    ag = data["agreement"]
    lines = [f"{a['label']} vs {b['label']}: {data['ops_compared']} aligned op calls, "
             f"{data['ops_differing']} differ",
             f"agreement: {agreement_text(ag)}"]
    for o in ag.get("one_sided") or []:
        if o.get("raised"):
            lines.append(f"  trial {o['trial']}: only {o['raised']} failed ({o['why']})")
    for t in data["trials"]:
        p = t.get("first_parting")
        if p is None:
            lines.append(f"trial {t['trial']}: the runs do not part"
                         + ("" if t.get("first_difference") is None else
                            " beyond the bounds (they differ within them)"))
            continue
        where = f"#{p['position']} {p['op']} in {p['module'] or '(top level)'}"
        lines.append(f"trial {t['trial']}: the runs part at {where}: {p['finding']}")
    causes = data.get("primary_causes") or []
    if causes:
        lines.append("primary causes:")
        for c in causes:
            lines.append(f"  {c['side']} violates {c['contract_class']} at {c['op']} in "
                         f"{c['module']}: {c['summary']} ({c['trials']} trial(s))")
    bad_sites = [s for s in data["sites"] if s["violations"]]
    if bad_sites:
        lines.append(f"diverging ops with a violation ({len(bad_sites)}):")
        for s in bad_sites:
            by_cause: dict = {}
            for v in s["violations"]:  # one entry per side and cause, its contracts listed
                by_cause.setdefault((v["side"], v.get("cause_class") or v["contract_class"]),
                                    []).append(v)
            vs = "; ".join(f"{side} {cls} ({', '.join(v['contract_id'] for v in group)}"
                           + (f"; operands {group[0]['operand_format']}"
                              if group[0].get("operand_format") else "") + ")"
                           for (side, cls), group in by_cause.items())
            lines.append(f"  {s['module'] or '(top level)'} {s['op']} x{s['calls']}: {vs}")
    prop = sum(s["causes"].get("propagated", 0) for s in data["sites"])
    if prop:
        lines.append(f"{prop} diverging call(s) conform on both sides on their own inputs "
                     "(the difference propagated from upstream)")
    lines.append("violators: " + (", ".join(data["violators"]) or "none"))
    for n in data.get("notes") or []:
        lines.append(f"note: {n}")
    return lines


# -- the plot ------------------------------------------------------------------------------------

def divergence_plot(data: Mapping[str, Any]) -> Optional["_plots.Plot"]:
    """Relative distance ||A - B|| / ||A|| of each aligned op's output against its position
    in the forward pass, one line per trial (ops that compute; data movement left out);
    ops where a side violates a contract marked."""
    if not _plots.available():
        return None
    series: dict = {}
    for d in data.get("divergence") or []:
        dist = d.get("distance")
        if dist is None or isinstance(dist, str):
            continue
        series.setdefault(d["trial"], []).append((d["position"], float(dist), d["violation"],
                                                  d["op"], d["module"]))
    series = {k: v for k, v in series.items() if v}
    if not series:
        return None
    floor = 1e-12
    fig = _plots._figure(7.0, 3.2)
    ax = fig.add_subplot(1, 1, 1)
    points = 0
    rows = [["trial", "position", "op", "module", "relative distance", "violation"]]
    for trial, pts in sorted(series.items()):
        xs = [p[0] for p in pts]
        ys = [max(p[1], floor) for p in pts]
        ax.plot(xs, ys, lw=1.0, alpha=0.75, label=f"trial {trial}")
        vx = [p[0] for p in pts if p[2]]
        vy = [max(p[1], floor) for p in pts if p[2]]
        if vx:
            ax.scatter(vx, vy, s=18, color=_plots.FAIL_COLOR, zorder=3)
        points += len(pts)
        rows += [[str(trial), str(p[0]), p[3], p[4], f"{p[1]:.3g}", "yes" if p[2] else ""]
                 for p in pts if p[1] > 0 or p[2]]
    ax.set_yscale("log")
    ax.set_xlabel("op position in the forward pass")
    ax.set_ylabel("||A − B|| / ||A||")
    ax.axhline(floor, color=_plots.NEUTRAL, lw=0.6, ls=":")
    ax.legend(fontsize=7, ncol=4, loc="lower right")
    return _plots.Plot("divergence", "Divergence growth through the model", _plots._svg(fig),
                       points, caption=(f"{len(series)} trial(s); red: a side violates a contract "
                                        f"on its own inputs; 0 drawn at {floor:g}"),
                       table=rows[:400])


# -- HTML ------------------------------------------------------------------------------------------

def render_html(data: Mapping[str, Any]) -> str:
    a, b = data["a"], data["b"]
    viol = data.get("violators") or []
    state, cls = ((f"at fault: {', '.join(viol)}", "disagree") if viol else
                  ("agree" if not data["ops_differing"] else "differ within the bounds", "agree"))
    parts = [f"<h1>kcontract trace comparison: {esc(a['label'])} vs {esc(b['label'])}</h1>",
             f'<p><span class="badge verdict-big b-{cls}" data-verdict="{esc(cls)}">{esc(state)}'
             f'</span> <span class="meta">model {esc(a.get("model"))} · '
             f'{esc(data["ops_compared"])} aligned op calls, {esc(data["ops_differing"])} '
             f'differ</span></p>',
             f'<p data-agreement="{esc(_agreement_value(data["agreement"]))}">'
             f'<b>Output agreement:</b> {esc(agreement_text(data["agreement"]))}</p>']
    for side in (a, b):
        parts.append(f"<h3>{esc(side['label'])}</h3>" + kv([
            ("trace", side.get("file")), ("device", f"{side.get('device')} "
                                                    f"({side.get('device_name') or '?'})"),
            ("torch", side.get("torch")), ("prelude", side.get("prelude") or "none"),
            ("float32 matmul precision", side.get("matmul_precision")),
            ("declared", ", ".join(f"{k}={v}" for k, v in (side.get("declare") or {}).items())),
            ("recorded ops", side.get("ops")),
            ("trials", "; ".join(f"{i}: {t}" for i, t in enumerate(side.get("trials") or [])))]))
    for n in data.get("notes") or []:
        parts.append(f'<p class="note">{esc(n)}</p>')
    causes = data.get("primary_causes") or []
    if causes:
        parts.append("<h2>Primary causes</h2>" + table(
            ["side", "contract", "op", "module", "cause", "trials"],
            [(c["side"], c["contract_class"], c["op"], c["module"], c["summary"], c["trials"])
             for c in causes], num_cols=(5,)))
    parts.append("<h2>Where the runs part, per trial</h2>" + table(
        ["trial", "first difference", "first op beyond both tolerances", "finding"],
        [(t["trial"], _where(t.get("first_difference")), _where(t.get("first_parting")),
          (t.get("first_parting") or {}).get("finding", "the runs do not part"))
         for t in data["trials"]]))
    plot = divergence_plot(data)
    if plot is not None:
        parts.append('<h2>Divergence growth</h2><div class="plots">' + figure(plot) + "</div>")
    sites = [s for s in data["sites"] if s.get("kcontract_op")]
    if sites:
        parts.append(f"<h2>Diverging ops, arbitrated ({len(sites)})</h2>")
        for s in sites:
            klass = "card" if s["violations"] else "card neutral"
            vrows = [(v["side"], badge("violation"), f"{v['contract_class']} "
                      f"<code>{esc(v['contract_id'])}</code>", esc(v.get("summary")),
                      esc(v["calls"])) for v in s["violations"]]
            body = (table(["side", "verdict", "contract", "cause", "calls"], vrows,
                          raw_cols=range(5)) if vrows else
                    f"<p>{esc(s['example'].get('finding'))}</p>")
            parts.append(
                f'<div class="{klass}" data-site="{esc(s["module"])}|{esc(s["op"])}">'
                f'<h3>{esc(s["module"] or "(top level)")} · <code>{esc(s["op"])}</code> → '
                f'{esc(s["kcontract_op"])}</h3>'
                + kv([("calls that differ", s["calls"]),
                      ("causes", ", ".join(f"{k}: {v}" for k, v in s["causes"].items())),
                      ("largest relative distance", _num(s.get("max_distance")))]) + body
                + "</div>")
    cov = data.get("coverage") or {}
    rows = []
    for label, c in cov.items():
        if c:
            rows.append((label, c.get("calls"), c.get("data_movement"), c.get("covered"),
                         c.get("checkable"), f"{100 * c.get('share_covered', 0):.0f} %"))
    if rows:
        parts.append("<h2>Coverage</h2>" + table(
            ["side", "op calls", "data movement", "covered", "checkable",
             "covered share of the computing calls"], rows, num_cols=(1, 2, 3, 4, 5)))
        first = next(iter(c for c in cov.values() if c), None)
        if first:
            parts.append("<details><summary>per aten op</summary>" + table(
                ["aten op", "calls", "kcontract op", "state"],
                [(r["aten"], r["calls"], r["kcontract_op"] or "", r["state"])
                 for r in first.get("ops") or []]) + "</details>")
    return page("kcontract trace comparison", "\n".join(parts))


def _agreement_value(ag: Mapping[str, Any]) -> str:
    if ag.get("kind") == "language model":
        return f"{ag['next_token']['percent']:.1f}"
    return f"{ag.get('normwise_rel', 0):.3g}"


def _where(p: Optional[Mapping[str, Any]]) -> str:
    if not p:
        return "none"
    return f"#{p['position']} {p['op']} ({p['module'] or 'top level'})"


def _num(x) -> str:
    if x is None:
        return ""
    if isinstance(x, str):
        return x
    return "inf" if math.isinf(x) else f"{x:.3g}"
