"""Terminal rendering of verdicts (rich): a table of one line per contract, then the
diagnosis (each primary cause with its evidence, its consequences folded under it)."""
from __future__ import annotations

from typing import Any, Mapping

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..diagnosis.text import cause_lines, of_run, role
from ..report._util import MARK, nothing_checked, summary_text

#: the verdict table's short codes (the full words are in the summary line and the JSON)
SHORT = {"pass": "pass", "violation": "viol", "error": "error", "skipped": "skip"}

STYLE = {"pass": "green", "violation": "bold red", "error": "bold magenta", "skipped": "dim",
         "conformant": "bold green", "explained": "yellow", "hint": "bold cyan"}


def results_table(run: Mapping[str, Any]) -> Table:
    """One line per contract: class, contract, verdict, kernel calls, time, and its role in
    the diagnosis (the cause, or the contract it follows from) or why it was skipped.  The
    count is of kernel calls (``ContractResult.cases``), which a protocol's probes make on top
    of the cases its message counts ("3 of 4 cases fail"), hence its own name."""
    diag = of_run(run)
    t = Table(title=f"{run['kernel']}  op={run['op']} dtype={run['dtype']} "
                    f"framework={run['framework']} device={run['device']}", title_justify="left",
              box=box.SIMPLE_HEAD, pad_edge=False)
    # every column but the note keeps its width in 80 columns; the note is cut first
    for name, kw in (("class", {"min_width": 8}),
                     ("contract", {"min_width": min(24, max((len(str(r.get("id", "")))
                                                             for r in run["results"]),
                                                            default=8))}),
                     ("verdict", {"min_width": 7}),
                     ("calls", {"justify": "right", "min_width": 5}),
                     ("time", {"justify": "right", "min_width": 5}),
                     ("note", {"overflow": "ellipsis", "max_width": 26})):
        t.add_column(name, no_wrap=True, **kw)
    for r in run["results"]:
        v = r["verdict"]
        note = role(diag, str(r.get("id"))) or (r.get("message", "") if v == "skipped" else "")
        t.add_row(r["contract"], r["id"], Text(f"{MARK.get(v, '?')} {SHORT.get(v, v)}",
                                                  style=STYLE.get(v, "")),
                  str(r.get("cases", "")), f"{r.get('seconds', 0):.2f}s", note)
    return t


def print_run(run: Mapping[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    console.print(results_table(run))
    for kind, line in cause_lines(run):
        if kind in ("violation", "error"):
            console.print()
        console.print(Text(line, style=STYLE.get(kind, "")))
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
    loose = [k for k, v in (run.get("limits") or {}).items()
             if isinstance(v, dict) and v.get("enforced") == "no" and box == "bubblewrap"]
    if loose:
        console.print(Text("limits not enforced: " + ", ".join(
            f"{k} ({run['limits'][k].get('why', '')})" for k in loose), style="bold yellow"))
