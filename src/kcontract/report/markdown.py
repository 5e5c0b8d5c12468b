"""Markdown: a short summary for a pull-request comment.

A headline with the verdict, one table row per contract, and for each
violation a collapsed block with its signature, measured against allowed, and
the line that reproduces it.  GitHub and GitLab both render ``<details>``.
"""
from __future__ import annotations

from typing import Any, Mapping

from ._util import (MARK, as_float, case_text, fmt_num, fmt_value, nothing_checked, overall,
                    ratio, results, signature_code, signature_quantities, summary_text)

ICON = {"conformant": "✅", "violation": "❌", "error": "⚠️"}


def _cell(text: Any, limit: int = 140) -> str:
    s = " ".join(str("" if text is None else text).split())
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.replace("|", "\\|")


def diagnosis_markdown(run: Mapping[str, Any]) -> list[str]:
    """The primary causes, each with the violations that follow from it, and the hints."""
    from ..diagnosis.text import of_run
    diag = of_run(run)
    if diag.empty:
        return []
    out = ["**Diagnosis**", ""]
    for c in diag.primary:
        what = "kernel error" if c.kind == "error" else c.cls
        out.append(f"- **{what}** (`{'`, `'.join(c.contracts)}`): {_cell(c.text, 300)}")
        for e in diag.consequences(c):
            out.append(f"  - `{e.contract}` follows from it: {_cell(e.reason, 200)}")
    for h in diag.hints:
        out.append(f"- hint: {_cell(h.text, 200)}")
    return out + [""]


def render_markdown(run: Mapping[str, Any]) -> str:
    """A pull-request comment for a run (``RunResult.to_json()``)."""
    verdict = overall(run)
    summary = summary_text(run)
    h = str(run.get("kernel_hash") or "")
    why = nothing_checked(run)
    head = (f"### ⚠️ kcontract: nothing was checked for `{run.get('kernel', '?')}`"
            if why is not None else
            f"### {ICON.get(verdict, '❔')} kcontract: `{run.get('kernel', '?')}` is **{verdict}**")
    lines = [head, *(["", f"every selected contract was skipped: {_cell(why, 400)}"]
                     if why is not None else []), "",
             f"op `{run.get('op', '?')}` · dtype `{run.get('dtype', '?')}` · framework "
             f"`{run.get('framework', '?')}` · device `{run.get('device', '?')}` · kernel "
             f"`{h[:12] or '–'}` · suite {run.get('suite_version', '?')} · {summary}", ""]
    rs = results(run)
    lines += diagnosis_markdown(run)
    if rs:
        lines += ["| | class | contract | verdict | message |", "|---|---|---|---|---|"]
        for r in rs:
            v = str(r.get("verdict", ""))
            lines.append(f"| {MARK.get(v, '?')} | {_cell(r.get('contract'))} | "
                         f"`{_cell(r.get('id'))}` | {v} | {_cell(r.get('message'))} |")
        lines.append("")
    for r in rs:
        if r.get("verdict") not in ("violation", "error"):
            continue
        v = r.get("violation") or {}
        lines.append(f"<details><summary><b>{r.get('contract', '')}</b> <code>{r.get('id', '')}"
                     f"</code>: {_cell(r.get('message'), 200)}</summary>")
        lines.append("")
        code = signature_code(r)
        if code:
            q = signature_quantities(r)
            shown = "; ".join(f"{k}={fmt_value(val, 60)}" for k, val in list(q.items())[:8])
            lines.append(f"- signature: `{code}`" + (f" ({_cell(shown, 400)})" if shown else ""))
        if v.get("case"):
            lines.append(f"- case: `{case_text(v['case'])}`")
        if v.get("measured") is not None or v.get("allowed") is not None:
            over = ratio(v.get("measured"), v.get("allowed"))
            times = f" ({over:.3g}× the allowed)" if over is not None else ""
            lines.append(f"- measured |error| {fmt_num(v.get('measured'))} vs allowed "
                         f"{fmt_num(v.get('allowed'))}{times}")
        total = as_float(v.get("total"))
        if total:
            lines.append(f"- mismatched elements: {int(as_float(v.get('mismatched')) or 0)} / "
                         f"{int(total)}")
        if r.get("tolerance"):
            lines.append(f"- tolerance: `{_cell(r['tolerance'], 300)}`")
        repro = r.get("reproduce") or v.get("reproduce")
        if repro:
            lines += ["", "```sh", str(repro), "```"]
        lines += ["", "</details>", ""]
    return "\n".join(lines).rstrip() + "\n"
