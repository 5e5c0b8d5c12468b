"""Self-contained HTML: run reports, the calibration matrix, certificates, arbitrations.

One file each, inline styles, plots inline as SVG (:mod:`.plots`), no external
resources.  A small inline script marks ``<body data-plots-rendered="k/n">``
once the page has laid out, so a headless browser can tell that the plots
really render.
"""
from __future__ import annotations

import html
import math
from typing import Any, Iterable, Mapping, Optional, Sequence

from . import plots as _plots
from ._util import (MARK, as_float, case_text, class_name, fmt_num, fmt_value,
                    nothing_checked, overall, ratio, recipe_rows, results, signature_code,
                    signature_quantities, summary_text)

CSS = """
:root { --pass:#2e7d32; --violation:#c62828; --error:#8e24aa; --skipped:#757575;
        --ink:#1f2328; --muted:#59636e; --line:#d0d7de; --bg:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       margin: 0; background: #fff; }
main { max-width: 1180px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 21px; margin: 0 0 4px; word-break: break-all; }
h2 { font-size: 17px; margin: 28px 0 10px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 8px; }
.meta { color: var(--muted); margin: 2px 0 12px; }
.badge { white-space: nowrap; display: inline-block; padding: 2px 10px; border-radius: 12px; color: #fff;
         font-weight: 600; font-size: 13px; }
.b-pass, .b-conformant, .b-certified, .b-agree { background: var(--pass); }
.b-violation, .b-rejected, .b-not-certified, .b-disagree { background: var(--violation); }
.b-error, .b-nothing-checked { background: var(--error); }
.b-skipped, .b-n-a { background: var(--skipped); }
.verdict-big { font-size: 16px; padding: 4px 14px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--bg); font-weight: 600; }
.card td:first-child, table.contracts td:first-child { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.msg { max-width: 520px; }
.card { border: 1px solid var(--line); border-left: 5px solid var(--violation); border-radius: 6px;
        padding: 10px 14px; margin: 12px 0; background: #fff; }
.card.error { border-left-color: var(--error); }
.card.neutral { border-left-color: #f9a825; }
.card h3 { margin-top: 2px; }
.kv { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; }
.kv dt { color: var(--muted); }
.kv dd { margin: 0; word-break: break-word; }
pre, code { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 4px; padding: 8px 10px;
      overflow-x: auto; white-space: pre-wrap; word-break: break-all; margin: 4px 0; }
.ratio { display: inline-block; height: 9px; background: var(--violation); border-radius: 2px;
         vertical-align: middle; margin-left: 8px; }
.ratio.ok { background: var(--pass); }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr)); gap: 14px; }
figure.plot { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 8px; }
figure.plot svg { width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 12.5px; margin-top: 4px; }
details summary { cursor: pointer; color: var(--muted); font-size: 12.5px; }
details table { font-size: 12px; }
.note { color: var(--muted); font-style: italic; }
footer { color: var(--muted); font-size: 12px; margin-top: 32px; }
@media (max-width: 700px) { .plots { grid-template-columns: 1fr; } main { padding: 12px; } }
"""

RENDER_CHECK = """
window.addEventListener("load", function () {
  var figs = document.querySelectorAll("figure.plot svg"), n = 0;
  for (var i = 0; i < figs.length; i++) {
    var r = figs[i].getBoundingClientRect();
    if (r.width > 50 && r.height > 30 && figs[i].querySelectorAll("path,use,text").length > 0) n++;
  }
  document.body.setAttribute("data-plots-rendered", n + "/" + figs.length);
});
"""


def text(x: Any) -> str:
    """Plain text of a JSON value (booleans as JSON spells them)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    return "" if x is None else str(x)


def esc(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def badge(verdict: str, big: bool = False) -> str:
    v = str(verdict)
    cls = "b-" + v.replace(" ", "-").replace("/", "-")
    mark = MARK.get(v, "")
    return (f'<span class="badge {cls}{" verdict-big" if big else ""}" data-verdict="{esc(v)}">'
            f'{esc(mark + " " if mark else "")}{esc(v)}</span>')


def page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n"
            f"<body><main>\n{body}\n</main><script>{RENDER_CHECK}</script></body></html>\n")


def kv(pairs: Iterable[tuple[str, Any]], raw: Sequence[str] = ()) -> str:
    items = []
    for k, v in pairs:
        if v is None or v == "":
            continue
        val = v if k in raw else esc(v)
        items.append(f"<dt>{esc(k)}</dt><dd>{val}</dd>")
    return f'<dl class="kv">{"".join(items)}</dl>' if items else ""


def table(header: Optional[Sequence[str]], rows: Iterable[Sequence[Any]], *,
          raw_cols: Sequence[int] = (), num_cols: Sequence[int] = (), cls: str = "") -> str:
    head = ("<thead><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr></thead>"
            if header else "")
    body = []
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            content = c if i in raw_cols else esc(text(c))
            klass = ' class="num"' if i in num_cols else ""
            cells.append(f"<td{klass}>{content}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    c = f' class="{cls}"' if cls else ""
    return f"<table{c}>{head}<tbody>{''.join(body)}</tbody></table>"


def figure(p: "_plots.Plot", contract: str = "") -> str:
    data = ""
    if p.table:
        data = ("<details><summary>the plotted numbers</summary>"
                + table(p.table[0], p.table[1:]) + "</details>")
    caption = esc(p.title) + (f" — {esc(p.caption)}" if p.caption else "")
    return (f'<figure class="plot" data-plot="{esc(p.kind)}" data-contract="{esc(contract)}" '
            f'data-points="{p.points}">{p.svg}<figcaption>{caption}</figcaption>{data}</figure>')


# -- run report ---------------------------------------------------------------------

def _ratio_bar(measured: Any, allowed: Any) -> str:
    r = ratio(measured, allowed)
    if r is None:
        return ""
    width = int(min(max(r, 0.0), 10.0) * 12) + 2
    ok = " ok" if r <= 1 else ""
    return f'<span class="ratio{ok}" style="width:{width}px" title="measured / allowed = {r:.3g}"></span>'


def violation_card(r: Mapping[str, Any]) -> str:
    v = r.get("violation") or {}
    verdict = str(r.get("verdict", ""))
    rows: list[tuple[str, Any]] = []
    if v.get("case"):
        rows.append(("case", case_text(v["case"])))
    total = as_float(v.get("total"))
    if total:
        mis = as_float(v.get("mismatched")) or 0
        rows.append(("mismatched elements", f"{int(mis)} of {int(total)} ({100 * mis / total:.1f}%)"))
    if v.get("index") is not None:
        idx = v["index"]
        idx = tuple(idx) if isinstance(idx, list) else idx
        rows.append(("worst element", f"{idx}: actual {fmt_num(v.get('actual'))}, expected "
                                      f"{fmt_num(v.get('expected'))}"))
    if v.get("measured") is not None or v.get("allowed") is not None:
        m, a = v.get("measured"), v.get("allowed")
        over = ratio(m, a)
        times = f" ({over:.3g}× the allowed)" if over is not None else ""
        rows.append(("measured vs allowed",
                     esc(f"|error| {fmt_num(m)} vs allowed {fmt_num(a)}{times}") + _ratio_bar(m, a)))
    if as_float(v.get("max_abs")) is not None and math.isfinite(as_float(v["max_abs"])):
        # (no finite error, e.g. every element overflowed: the worst element says it)
        rows.append(("greatest errors", f"absolute {fmt_num(v.get('max_abs'))}, relative "
                                        f"{fmt_num(v.get('max_rel'))}"))
    code = signature_code(r)
    q = signature_quantities(r)
    sig_html = f"<code>{esc(code)}</code>" if code else ""
    if q:
        sig_html += table(["quantity", "value"], [(k, fmt_value(val)) for k, val in q.items()])
    rec = recipe_rows(r)
    if rec:
        sig_html += ("<p>recovered recipe</p>" +
                     table(["field", "value", "confidence", "evidence"], rec))
    if sig_html:
        rows.append(("signature", sig_html))
    if r.get("tolerance"):
        rows.append(("tolerance", f"<code>{esc(r['tolerance'])}</code>"))
    repro = r.get("reproduce") or v.get("reproduce")
    if repro:
        rows.append(("reproduce", f"<pre>{esc(repro)}</pre>"))
    tb = (r.get("details") or {}).get("traceback") if isinstance(r.get("details"), Mapping) else None
    if tb:
        rows.append(("traceback", f"<pre>{esc(str(tb)[-3000:])}</pre>"))
    raw = ("measured vs allowed", "signature", "tolerance", "reproduce", "traceback")
    title = (f"{esc(r.get('contract', ''))} <code>{esc(r.get('id', ''))}</code> "
             f"{badge(verdict)}")
    return (f'<div class="card {esc(verdict)}" id="v-{esc(r.get("id", ""))}" '
            f'data-contract="{esc(r.get("id", ""))}"><h3>{title}</h3>'
            f'<p>{esc(r.get("message", ""))}</p>{kv(rows, raw)}</div>')


def _env_value(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt_value(x, 80) for x in v)
    if isinstance(v, Mapping):
        return fmt_value(v, 300)
    return text(v)


def environment_table(env: Mapping[str, Any]) -> str:
    if not env:
        return '<p class="note">no environment recorded</p>'
    return table(None, [(k, _env_value(v)) for k, v in env.items()])


def run_header(run: Mapping[str, Any], title: str = "kcontract report") -> str:
    env = run.get("environment") or {}
    verdict = overall(run)
    summary = summary_text(run)
    why = nothing_checked(run)
    if why is not None:
        verdict, summary = "nothing checked", f"every selected contract was skipped ({why})"
    h = str(run.get("kernel_hash") or "")
    device = run.get("device", "")
    if env.get("device_name"):
        device = f"{device} ({env['device_name']})"
    return (f"<h1>{esc(title)}: {esc(run.get('kernel', '?'))}</h1>"
            f'<p class="meta">op <b>{esc(run.get("op", "?"))}</b> · dtype '
            f'<b>{esc(run.get("dtype", "?"))}</b> · framework {esc(run.get("framework", "?"))} · '
            f'device {esc(device)} · kernel sha256 <code title="{esc(h)}">{esc(h[:16] or "–")}'
            f'</code> · suite {esc(run.get("suite_version", "?"))}</p>'
            f'<p>{badge(verdict, big=True)} <span class="meta">{esc(summary)} in '
            f'{fmt_num(run.get("seconds", 0))} s</span></p>')


def contract_table(run: Mapping[str, Any]) -> str:
    rows = []
    for r in results(run):
        v = str(r.get("verdict", ""))
        link = (f'<a href="#v-{esc(r.get("id", ""))}">{esc(r.get("id", ""))}</a>'
                if v in ("violation", "error") else esc(r.get("id", "")))
        rows.append((esc(r.get("contract", "")), esc(class_name(r.get("contract", ""))), link,
                     badge(v), esc(r.get("cases", "")), esc(f"{as_float(r.get('seconds')) or 0:.2f} s"),
                     esc(r.get("message", ""))))
    if not rows:
        return '<p class="note">no contract was run</p>'
    # kernel calls, which a protocol's probes make on top of the cases its message counts
    # ("3 of 4 cases fail"): named as in the terminal's table
    return table(["class", "name", "contract", "verdict", "calls", "time", "message"], rows,
                 raw_cols=range(7), num_cols=(4, 5), cls="contracts")


def plots_section(run: Mapping[str, Any]) -> str:
    if not _plots.available():
        return ('<h2>Plots</h2><p class="note">plots need matplotlib '
                '(<code>pip install kcontract[plots]</code>)</p>')
    claims = run.get("claims") or {}
    acc = str(claims.get("accumulate") or "") if isinstance(claims, Mapping) else ""
    blocks = []
    for r in results(run):
        figs = _plots.plots_for(r, str(run.get("op", "")), acc)
        if not figs:
            continue
        inner = "".join(figure(p, str(r.get("id", ""))) for p in figs)
        blocks.append(f'<section class="contract-plots" data-contract="{esc(r.get("id", ""))}">'
                      f"<h3>{esc(r.get('contract', ''))} <code>{esc(r.get('id', ''))}</code> "
                      f"{badge(str(r.get('verdict', '')))}</h3>"
                      f'<div class="plots">{inner}</div></section>')
    if not blocks:
        return ""
    return "<h2>Plots</h2>" + "".join(blocks)


def diagnosis_section(run: Mapping[str, Any]) -> str:
    """The primary causes with the violations that follow from them, and the hints."""
    from ..diagnosis.text import of_run
    diag = of_run(run)
    if diag.empty:
        return ""
    items = []
    for c in diag.primary:
        what = "kernel error" if c.kind == "error" else c.cls
        sub = "".join(f"<li><code>{esc(e.contract)}</code> follows from it: {esc(e.reason)}</li>"
                      for e in diag.consequences(c))
        items.append(f"<li><b>{esc(what)}</b> (<code>{esc(', '.join(c.contracts))}</code>): "
                     f"{esc(c.text)}" + (f"<ul>{sub}</ul>" if sub else "") + "</li>")
    items += [f"<li>hint: {esc(h.text)}</li>" for h in diag.hints]
    return f"<h2>Diagnosis</h2><ul class=\"diagnosis\">{''.join(items)}</ul>"


def render_html(run: Mapping[str, Any]) -> str:
    """One self-contained HTML page for a run (``RunResult.to_json()``)."""
    parts = [run_header(run), diagnosis_section(run), "<h2>Contracts</h2>", contract_table(run)]
    bad = [r for r in results(run) if r.get("verdict") in ("violation", "error")]
    if bad:
        parts.append(f"<h2>Violations and errors ({len(bad)})</h2>")
        parts.extend(violation_card(r) for r in bad)
    parts.append(plots_section(run))
    claims = run.get("claims") or {}
    parts.append("<h2>Claims</h2>" + (table(["claim", "value"], list(claims.items()))
                                       if claims else '<p class="note">none</p>'))
    parts.append("<h2>Environment</h2>" + environment_table(run.get("environment") or {}))
    timings = run.get("timings") or {}
    if timings:
        parts.append("<h3>Where the time went (seconds)</h3>" + table(
            None, [(k, fmt_num(v)) for k, v in timings.items()], num_cols=(1,)))
    parts.append(f'<footer>schema {esc(run.get("schema", ""))} · rendered by kcontract</footer>')
    return page(f"kcontract: {run.get('kernel', '')} {overall(run)}", "\n".join(parts))


# -- calibration matrix ----------------------------------------------------------------

def render_calibration_html(calibrations: Sequence[Mapping[str, Any]]) -> str:
    """The calibration matrix (``Calibration.to_json()`` for each contract) as one page."""
    cals = [c for c in calibrations if isinstance(c, Mapping)]
    sound = sum(1 for c in cals if c.get("sound"))
    verdict = "pass" if cals and sound == len(cals) else "violation"
    parts = ["<h1>kcontract calibration matrix</h1>",
             f'<p>{badge("sound" if verdict == "pass" else "unsound", big=True)} '
             f'<span class="meta">{sound} of {len(cals)} contracts soundly calibrated</span></p>',
             '<p class="meta">baseline must fail the basic functional test; bad must pass it and '
             'violate the contract; good must pass both.</p>']
    p = _plots.calibration_matrix(cals)
    if p is not None:
        parts.append(f'<div class="plots">{figure(p)}</div>')
    rows = []
    for c in cals:
        cells = {str(cell.get("role")): cell for cell in (c.get("cells") or [])
                 if isinstance(cell, Mapping)}
        row = [esc(c.get("contract", "")), f"<code>{esc(c.get('id', ''))}</code>",
               esc(c.get("dtype", ""))]
        for role in _plots.ROLES:
            cell = cells.get(role)
            if cell is None:
                row.append('<span class="note">—</span>')
                continue
            basic = cell.get("basic")
            b = "basic ✓" if basic else ("basic ✗" if basic is False else "basic ?")
            row.append(f"{badge('pass' if cell.get('sound') else 'violation')} "
                       f"{esc(b)} / {esc(cell.get('verdict') or '–')}"
                       + (f"<br><small>{esc(cell.get('code'))}</small>" if cell.get("code") else ""))
        state = "sound" if c.get("sound") else ("error: " + str(c.get("error")) if c.get("error")
                                                else "unsound")
        row.append(badge("pass" if c.get("sound") else "violation") + " " + esc(state))
        rows.append(row)
    parts.append(table(["class", "contract", "dtype", "baseline", "bad", "good", "calibration"],
                       rows, raw_cols=range(7)))
    return page("kcontract calibration", "\n".join(parts))


# -- certificate -------------------------------------------------------------------------

def render_certificate_html(cert: Mapping[str, Any]) -> str:
    certified = bool(cert.get("certified"))
    state = "certified" if certified else "not certified"
    kernel = cert.get("kernel") or {}
    claims = cert.get("claims") or {}
    levels = cert.get("levels") or {}
    parts = [f"<h1>kcontract certificate: {esc(kernel.get('spec', '?'))}</h1>",
             f'<p>{badge(state, big=True)} <span class="meta">requested level '
             f'{esc(cert.get("level"))}, achieved level {esc(cert.get("level_achieved"))} · '
             f'op {esc(cert.get("op"))} · dtype {esc(cert.get("dtype"))} · framework '
             f'{esc(cert.get("framework"))} · device {esc(cert.get("device"))}</span></p>',
             kv([("kernel", kernel.get("spec")), ("kernel module", kernel.get("module")),
                 ("kernel source sha256", f"<code>{esc(kernel.get('sha256'))}</code>"),
                 ("suite version", cert.get("suite_version")),
                 ("kcontract", cert.get("kcontract_version")), ("issued", cert.get("issued")),
                 ("seed", cert.get("seed")),
                 ("content sha256", f"<code>{esc(cert.get('content_hash'))}</code>")],
                raw=("kernel source sha256", "content sha256"))]
    if levels:
        parts.append("<h2>Conformance levels</h2>" + table(
            ["level", "families and classes required"],
            [(f"{k} {(cert.get('level_names') or {}).get(k, '')}".strip(),
              ", ".join(v) if isinstance(v, list) else v) for k, v in levels.items()]))
    rows = []
    for v in cert.get("verdicts") or []:
        rows.append((esc(v.get("contract", "")), f"<code>{esc(v.get('id', ''))}</code>",
                     badge(str(v.get("verdict", ""))), esc(v.get("signature") or ""),
                     esc(v.get("message", ""))))
    parts.append("<h2>Verdicts</h2>" + table(["class", "contract", "verdict", "signature",
                                               "message"], rows, raw_cols=range(5)))
    rec = cert.get("recipe")
    if isinstance(rec, Mapping) and rec.get("summary"):
        rows = recipe_rows({"signature": {"recovered_recipe": rec}})
        parts.append(f"<h2>Recovered recipe</h2><p>{esc(rec.get('summary'))} "
                     f'<span class="meta">(from the {esc(rec.get("contract", ""))} violation)'
                     "</span></p>" + table(["field", "value", "confidence", "evidence"], rows))
    na = cert.get("not_applicable") or []
    if na:
        parts.append('<p class="meta">classes of the level with no contract for this op: '
                     f'{esc(", ".join(na))}</p>')
    parts.append("<h2>Claims</h2>" + table(["claim", "value"], list(claims.items())))
    parts.append("<h2>Environment</h2>" + environment_table(cert.get("environment") or {}))
    parts.append('<footer>Verify with <code>kcontract verify-certificate CERT.json</code> '
                 '(add <code>--rerun</code> to reproduce it on this machine).</footer>')
    return page(f"kcontract certificate: {kernel.get('spec', '')}", "\n".join(parts))


# -- arbitration ---------------------------------------------------------------------------

def render_arbitration_html(report: Mapping[str, Any]) -> str:
    a, b = report.get("a") or {}, report.get("b") or {}
    violators = report.get("violators") or []
    if violators:
        state = f"at fault: {', '.join(violators)}"
        state_cls = "disagree"
    else:
        state = "agree" if report.get("agree") else "differ within the bounds"
        state_cls = "agree"
    parts = [f"<h1>kcontract arbitration: {esc(a.get('label', 'A'))} vs "
             f"{esc(b.get('label', 'B'))}</h1>",
             f'<p><span class="badge verdict-big b-{state_cls}" data-verdict="{esc(state_cls)}">'
             f'{esc(state)}</span> <span class="meta">op {esc(report.get("op"))} · dtype '
             f'{esc(report.get("dtype"))} · {esc(report.get("differing_calls", 0))} of '
             f'{esc(report.get("calls", 0))} calls differ bitwise</span></p>']
    for side in (a, b):
        parts.append(f"<h3>{esc(side.get('label'))}</h3>" + kv([
            ("kernel", side.get("kernel")), ("kernel sha256", side.get("kernel_hash")),
            ("framework / device", f"{side.get('framework')} / {side.get('device')}"),
            ("device name", side.get("device_name")), ("recorded on", side.get("machine")),
            ("claims", fmt_value(side.get("claims") or {}, 400))]))
    for note in report.get("notes") or []:
        parts.append(f'<p class="note">{esc(note)}</p>')
    causes = report.get("causes") if isinstance(report.get("causes"), Mapping) else None
    if causes and causes.get("statement"):
        parts.append(f"<h2>Primary causes</h2><p>{esc(causes['statement'])}</p>")
    rows = [(esc(c.get("contract")), f"<code>{esc(c.get('id'))}</code>",
             badge(str(c.get("a_verdict"))), badge(str(c.get("b_verdict"))),
             esc(c.get("differing_calls", 0)), esc(c.get("finding", "")))
            for c in report.get("contracts") or []]
    parts.append("<h2>Per contract</h2>" + table(
        ["class", "contract", f"{a.get('label', 'A')}", f"{b.get('label', 'B')}",
         "differing calls", "finding"], rows, raw_cols=range(6)))
    dis = report.get("disagreements") or []
    if dis:
        parts.append(f"<h2>Disagreements ({len(dis)})</h2>")
        for d in dis:
            klass = "card" if d.get("at_fault") else "card neutral"
            parts.append(f'<div class="{klass}"><h3>{esc(d.get("contract"))} '
                         f'<code>{esc(d.get("id"))}</code></h3><p>{esc(d.get("statement"))}</p>'
                         + kv([("example call", d.get("example")),
                               (f"{a.get('label', 'A')}: signature", d.get("a_signature")),
                               (f"{b.get('label', 'B')}: signature", d.get("b_signature"))])
                         + "</div>")
    return page("kcontract arbitration", "\n".join(parts))


def render_index_html(title: str, intro: str,
                      sections: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> str:
    """A page of links to other reports: per section, rows of ``name``, ``verdict``,
    ``summary`` and ``href`` (relative to the page), e.g. what ``kcontract demo`` wrote."""
    body = [f"<h1>{esc(title)}</h1>", f"<p class=\"sub\">{esc(intro)}</p>"]
    for heading, rows in sections:
        body.append(f"<h2>{esc(heading)}</h2>")
        body.append(table(["report", "verdict", "summary"], [
            (f'<a href="{html.escape(str(r["href"]), quote=True)}">{esc(r["name"])}</a>',
             badge(r["verdict"]), r.get("summary", "")) for r in rows], raw_cols=(0, 1)))
    return page(title, "\n".join(body))
