"""Terminal rendering of verdicts (rich): a table, then one fixed-shape block per violation."""
from __future__ import annotations

from typing import Any, Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..report._util import MARK, nothing_checked, summary_text
from ..report._util import violation_lines as violation_block

STYLE = {"pass": "green", "violation": "bold red", "error": "bold magenta", "skipped": "dim",
         "conformant": "bold green"}


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
    box = run.get("sandbox")
    if box:
        console.print(Text(f"sandbox: {box}", style="dim" if box == "bubblewrap" else "bold yellow"))
