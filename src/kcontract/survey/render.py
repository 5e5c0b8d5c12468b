"""The matrix for people: a terminal table (rich), an HTML heat map, a side-by-side
comparison.  Renderers read a :class:`~.matrix.SurveyMatrix`; they compute nothing."""
from __future__ import annotations

import html as _html

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..formats import short_name
from .cells import CHECKED, NO_CONTRACT
from .matrix import Difference, SurveyMatrix

MARK = {"pass": "✓", "violation": "✗", "error": "!", "skipped": "–", NO_CONTRACT: " "}
STYLE = {"pass": "green", "violation": "bold red", "error": "bold magenta", "skipped": "dim",
         NO_CONTRACT: ""}
#: heat-map colours per verdict (and per cell state)
COLOUR = {"pass": "#2e7d32", "violation": "#c62828", "error": "#6a1b9a", "skipped": "#bdbdbd",
          NO_CONTRACT: "#ffffff", "not covered": "#eeeeee", "unsupported": "#f5f5f5",
          "lost": "#000000", "n/a": "#bdbdbd", "follows": "#f4c7c3"}


def short(cls: str) -> str:
    return cls[2:] if cls.startswith("C-") else cls


def tiny(cls: str) -> str:
    """C-PRC-01 -> P1: a column header narrow enough for twelve classes on a terminal."""
    fam, _, num = short(cls).partition("-")
    return f"{fam[:1]}{int(num) if num.isdigit() else num}"


#: the mark of a violated contract that another contract's cause explains
FOLLOWS = "↳"


def print_matrix(m: SurveyMatrix, console: Console, show_unsupported: bool = False) -> None:
    t = Table(title=f"kcontract survey: {m.label} ({m.executor}, {m.seconds:.1f} s)",
              title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0))
    t.add_column("op ", no_wrap=True)
    t.add_column("dtype ", no_wrap=True)
    t.add_column("verdict ", no_wrap=True)
    for cls in m.classes:
        t.add_column(tiny(cls), no_wrap=True, width=3)
    hidden = 0
    uncovered = []
    for op in m.ops:
        cells = [m.cell(op, dt) for dt in m.dtypes]
        if cells and all(c is not None and c.status == "not covered" for c in cells):
            uncovered.append(op)  # one line for the whole op, below the table
            continue
        for dt, c in zip(m.dtypes, cells):
            if c is None:
                continue
            if c.status == "unsupported" and not show_unsupported:
                hidden += 1
                continue
            if c.status != CHECKED:
                t.add_row(op + " ", short_name(dt) + " ", f"[dim]{c.status}[/]" if c.status != "lost" else
                          f"[bold red]lost[/] {escape(c.error[:40])}", *[""] * len(m.classes))
                continue
            style = "green" if c.verdict == "conformant" else "dim" if c.verdict == "n/a" else "bold red"
            marks = []
            for cls in m.classes:
                v = c.classes.get(cls)
                verdict = v.verdict if v else NO_CONTRACT
                if v is not None and v.role == "follows":
                    marks.append(f"[yellow]{FOLLOWS}[/]")
                else:
                    marks.append(f"[{STYLE[verdict]}]{MARK[verdict]}[/]" if STYLE[verdict] else MARK[verdict])
            verdict = {"conformant": "conforms"}.get(c.verdict, c.verdict)
            t.add_row(op + " ", short_name(dt) + " ", f"[{style}]{verdict}[/] ", *marks)
    console.print(t)
    console.print("[dim]" + "  ".join(f"{tiny(c)} {c}" for c in m.classes) + "[/]")
    console.print(f"[dim]✓ pass  ✗ a primary cause  {FOLLOWS} violated, explained by the cell's "
                  f"cause  ! kernel error  – skipped[/]")
    if uncovered:
        console.print(f"[dim]not covered by the {m.framework} table: {', '.join(uncovered)}[/]")
    if hidden:
        console.print(f"[dim]{hidden} (op, dtype) pairs the {m.framework} table does not survey "
                      f"are not shown (they are in the JSON and HTML)[/]")
    failing = [(k, c) for k, c in sorted(m.cells.items())
               if c.status == CHECKED and c.verdict in ("violation", "error")]
    for (op, dt), c in failing:
        for cause in c.causes:
            shown = ",".join(cause.get("contracts") or ())
            mark = "!" if cause.get("kind") == "error" else "✗"
            code = str(cause.get("code") or "").split(".", 1)[-1]
            console.print(f"[bold red]{mark}[/] {op} {dt} [bold]{escape(str(cause.get('class')))}"
                          f"[/] {escape(code)} ({escape(shown)}): "
                          f"{escape(str(cause.get('cause', '')))}", highlight=False)
        for cls, v in sorted(c.classes.items()):
            if v.role == "follows":
                console.print(f"  [yellow]{FOLLOWS}[/] {cls} {','.join(v.contracts)} "
                              f"{escape(v.cause)}", highlight=False)
        for h in c.hints:
            console.print(f"  [dim]hint: {escape(h)}[/]", highlight=False)
    n = m.counts()
    console.print(f"{m.framework} {m.environment.get(m.framework) or ''} on "
                  f"{m.environment.get('device_name', m.device)}: "
                  + ", ".join(f"{v} {k}" for k, v in sorted(n.items()))
                  + f"; backend level {m.backend_level()} over the checked cells", highlight=False)


def print_compare(a: SurveyMatrix, b: SurveyMatrix, rows: list[Difference], console: Console,
                  all_rows: bool = True, labels: tuple = ()) -> None:
    la, lb = labels or (a.label, b.label)
    t = Table(title=f"{la}  vs  {lb}", title_justify="left")
    for col in ("op", "dtype", "class", la, lb, "primary cause"):
        t.add_column(col)
    ndiff = sum(r.differs for r in rows)
    for r in rows:
        if not r.differs and not all_rows:
            continue
        style = "bold" if r.differs else "dim"
        cause = r.a_cause or r.b_cause
        t.add_row(r.op, r.dtype, short(r.cls) or "(cell)", f"[{style}]{escape(r.a)}[/]",
                  f"[{style}]{escape(r.b)}[/]", escape(cause[:90]) if r.differs else "")
    console.print(t)
    console.print(f"{ndiff} of {len(rows)} (op, dtype, class) entries differ")


def matrix_html(m: SurveyMatrix) -> str:
    """A self-contained heat map: one row per (op, dtype), one column per class; each
    failing cell names its primary cause (signature code; the message on hover)."""
    e = _html.escape
    head = "".join(f"<th>{e(short(c))}</th>" for c in m.classes)
    rows = []
    for op in m.ops:
        for i, dt in enumerate(m.dtypes):
            c = m.cell(op, dt)
            if c is None:
                continue
            first = f'<th rowspan="{len(m.dtypes)}" class="op">{e(op)}</th>' if i == 0 else ""
            label = f"<td class=dt>{e(dt)}</td>"
            if c.status != CHECKED:
                colour = COLOUR.get(c.status, "#fff")
                text = e(c.status + (f": {c.error}" if c.error else ""))
                rows.append(f"<tr>{first}{label}<td colspan={len(m.classes)} class=state "
                            f"style='background:{colour};color:{'#fff' if c.status == 'lost' else '#555'}'>"
                            f"{text}</td></tr>")
                continue
            tds = []
            for cls in m.classes:
                v = c.classes.get(cls)
                verdict = v.verdict if v else NO_CONTRACT
                colour = COLOUR[verdict]
                title = e(f"{cls} {','.join(v.contracts)}: {verdict}. {v.message} "
                          f"[tolerance: {v.tolerance}] {v.reproduce}") if v and v.contracts else ""
                text = e(v.code.split(".", 1)[-1]) if v and v.code else (
                    MARK[verdict] if verdict != NO_CONTRACT else "")
                fg = "#fff" if verdict in ("pass", "violation", "error") else "#333"
                if v is not None and v.role == "cause":
                    # the primary cause, by its class (a C-PRC-02 finding may show C-PRC-01's)
                    text = e(f"{short(v.cause_class)}: {(v.cause_code or v.code).split('.', 1)[-1]}"
                             if v.cause_class and v.cause_class != cls else text)
                    title = e(f"primary cause {v.cause_class}: {v.cause}. ") + title
                elif v is not None and v.role == "follows":
                    colour, fg = COLOUR["follows"], "#333"
                    text = e(f"{FOLLOWS} {short(v.cause_class)}")
                    title = e(f"{v.cause}. ") + title
                tds.append(f"<td title='{title}' style='background:{colour};color:{fg}'>{text}</td>")
            rows.append(f"<tr>{first}{label}{''.join(tds)}</tr>")
    env = m.environment
    counts = ", ".join(f"{v} {e(k)}" for k, v in sorted(m.counts().items()))
    legend = "".join(f"<span style='background:{COLOUR[k]};color:{'#fff' if k in ('pass','violation','error','lost') else '#333'}'>{e(k)}</span>"
                     for k in ("pass", "violation", "follows", "error", "skipped", "not covered", "unsupported", "lost"))
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>kcontract survey: {e(m.label)}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse;font-size:13px}}
th,td{{border:1px solid #ccc;padding:4px 6px;text-align:center;white-space:nowrap}}
th.op{{text-align:left;vertical-align:top}} td.dt{{text-align:left}} td.state{{font-style:italic}}
.legend span{{padding:2px 8px;margin-right:4px;border:1px solid #ccc}}
</style></head><body>
<h1>kcontract survey: {e(m.label)}</h1>
<p>{e(m.framework)} {e(str(env.get(m.framework) or ''))} on {e(str(env.get('device_name', m.device)))};
suite {e(m.suite_version)}; {e(m.executor)}, {m.seconds:.1f} s; {counts};
backend conformance level {m.backend_level()} over the checked cells.</p>
<p class="legend">{legend}</p>
<p>Each cell: the class's verdict for the library's implementation of the op at the dtype;
a failing cell names its primary cause (the signature code, and the cause's class where it is
another class's: a class's contract can show a precision cause); a violation another
contract's cause explains ("follows", {FOLLOWS} and that cause's class) is shaded lighter.
Hover for the message, tolerance and the command that reproduces it.</p>
<table><tr><th>op</th><th>dtype</th>{head}</tr>
{''.join(rows)}
</table></body></html>
"""
