"""Terminal rendering of verdicts (rich): a table, then one fixed-shape block per violation."""
from __future__ import annotations

import math
from typing import Any, Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..report._util import as_float, fmt_num, nothing_checked, summary_text

STYLE = {"pass": "green", "violation": "bold red", "error": "bold magenta", "skipped": "dim",
         "conformant": "bold green"}
MARK = {"pass": "✓", "violation": "✗", "error": "!", "skipped": "-"}


def results_table(run: Mapping[str, Any]) -> Table:
    t = Table(title=f"{run['kernel']}  op={run['op']} dtype={run['dtype']} "
                    f"framework={run['framework']} device={run['device']}", title_justify="left")
    t.add_column("class")
    t.add_column("contract")
    t.add_column("verdict")
    t.add_column("cases", justify="right")
    t.add_column("time", justify="right")
    t.add_column("message", overflow="fold", max_width=70)
    for r in run["results"]:
        v = r["verdict"]
        t.add_row(r["contract"], r["id"], Text(f"{MARK.get(v, '?')} {v}", style=STYLE.get(v, "")),
                  str(r.get("cases", "")), f"{r.get('seconds', 0):.2f}s", r.get("message", ""))
    return t


def violation_block(r: Mapping[str, Any]) -> list[str]:
    """The fixed shape: headline; mismatches and share; worst abs/rel error with index and
    what was allowed; the signature; the tolerance; the reproduce line."""
    v = r.get("violation") or {}
    lines = [f"{MARK.get(r['verdict'], '?')} {r['contract']} {r['id']}: {r['message']}"]
    if v.get("case"):
        case = v["case"]
        shape = ",".join(f"{k}={val}" for k, val in (case.get("shape") or {}).items())
        extra = "".join(f" {k}={val}" for k, val in (case.get("extra") or {}).items())
        lines.append(f"  case: {shape} dtype={case.get('dtype')} family={case.get('family')} "
                     f"seed={case.get('seed')}{extra}")
    if v.get("total"):
        share = 100.0 * v["mismatched"] / v["total"]
        lines.append(f"  mismatched elements: {v['mismatched']} / {v['total']} ({share:.1f}%)")
    if v.get("index") is not None:
        lines.append(f"  worst element {tuple(v['index'])}: actual {fmt_num(v.get('actual'))}, "
                     f"expected {fmt_num(v.get('expected'))}, |error| {fmt_num(v.get('measured'))}"
                     f", allowed {fmt_num(v.get('allowed'))}")
    if as_float(v.get("max_abs")) is not None and math.isfinite(as_float(v["max_abs"])):
        # (no finite error, e.g. every element overflowed: the worst element says it)
        lines.append(f"  greatest absolute error {fmt_num(v.get('max_abs'))}, "
                     f"greatest relative error {fmt_num(v.get('max_rel'))}")
    sig = r.get("signature") or {}
    if sig:
        code = sig.get("code", "")
        rest = {k: val for k, val in sig.items() if k not in ("code", "details")}
        shown = "; ".join(f"{k}={_short(val)}" for k, val in rest.items())
        lines.append(f"  signature: {code}" + (f" — {shown}" if shown else ""))
    if r.get("tolerance"):
        lines.append(f"  tolerance: {r['tolerance']}")
    if r.get("reproduce"):
        lines.append(f"  reproduce: {r['reproduce']}")
    return lines


def _short(val: Any, limit: int = 120) -> str:
    if isinstance(val, float):
        s = fmt_num(val)
    elif isinstance(val, (list, tuple)) and len(val) > 6:
        s = "[" + ", ".join(_short(x, 30) for x in val[:6]) + f", … {len(val) - 6} more]"
    elif isinstance(val, dict):
        s = "{" + ", ".join(f"{k}: {_short(x, 30)}" for k, x in list(val.items())[:6]) + "}"
    else:
        s = str(val)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def print_run(run: Mapping[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    console.print(results_table(run))
    for r in run["results"]:
        if r["verdict"] in ("violation", "error"):
            console.print()
            for i, line in enumerate(violation_block(r)):
                console.print(Text(line, style=STYLE.get(r["verdict"], "") if i == 0 else ""))
    summary = summary_text(run)
    why = nothing_checked(run)
    if why is not None:
        console.print(Text(f"note: nothing was checked: every selected contract was skipped "
                           f"({why})", style="bold yellow"))
    console.print()
    console.print(Text(f"verdict: {run['verdict']} ({summary}) in {run.get('seconds', 0):.1f}s",
                       style=STYLE.get(run["verdict"], "bold red")))
