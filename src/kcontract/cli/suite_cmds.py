"""``list``, ``explain``, ``schema``, ``formats``, ``calibrate``, ``demo``."""
from __future__ import annotations

import json
import sys

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import UsageError, did_you_mean
from ..files import write_json, write_text
from . import EXIT_FAIL, EXIT_OK, main


@main.command("list")
@click.option("--op", help="only contracts of this op")
@click.option("--class", "cls", help="only this contract class (e.g. C-PRC-01)")
def list_command(op, cls):
    """The ops, the contract classes and the contracts of the suite (--op: also a
    user-defined op, path/to/ops.py:NAME or module:NAME, with the generic contracts)."""
    from ..classes import CLASSES
    from ..ops import OPS, get_op
    from ..suite import load_generic, load_suite
    if op:
        op = get_op(op).name
    if cls and cls not in CLASSES:
        raise UsageError(f"unknown contract class {cls!r}{did_you_mean(cls, CLASSES)}")
    console = Console()
    contracts = load_suite()
    if op and not any(k.op == op for k in contracts):
        contracts = [k for k in load_generic()]
        op = None
    _ops_table(console, [get_op(op)] if op else list(OPS.values()), contracts)
    t = Table(title="contract classes", title_justify="left")
    for col in ("class", "family", "primitive", "name", "contracts"):
        t.add_column(col)
    for c in CLASSES.values():
        if cls and c.id != cls:
            continue
        ops = [k.op for k in contracts if k.cls == c.id and (not op or k.op == op)]
        if op and not ops:
            continue
        t.add_row(c.id, c.family, c.primitive, c.name, ", ".join(ops))
    console.print(t)
    t2 = Table(title="contracts", title_justify="left")
    for col in ("id", "class", "op", "dtypes", "protocol", "title"):
        t2.add_column(col)
    for k in contracts:
        if (op and k.op != op) or (cls and k.cls != cls):
            continue
        t2.add_row(k.id, k.cls, k.op, " ".join(k.scope.dtypes), k.protocol.kind, k.title)
    console.print(t2)
    if not cls:
        from ..ops import OPS
        t3 = Table(title="ops", title_justify="left")
        t3.add_column("op", no_wrap=True)
        t3.add_column("calling convention")
        for name, o in OPS.items():
            if not op or name == op:
                t3.add_row(name, o.summary)
        console.print(t3)


def _ops_table(console, ops, contracts) -> None:
    t = Table(title="ops", title_justify="left")
    for col in ("op", "calling convention", "contracts", "optional capabilities"):
        t.add_column(col)
    for o in ops:
        own = sum(1 for k in contracts if k.op == o.name)
        caps = ", ".join(k for k, v in o.capabilities().items() if v)
        t.add_row(o.name, o.summary, str(own) if own else "generic", caps)
    console.print(t)


@main.command("explain")
@click.argument("ident")
def explain_command(ident):
    """One contract (by id) with all eight parts, or a class (by ID) with its contracts."""
    from ..classes import CLASSES
    from ..suite import get_contract, load_suite
    from .explain import explain_class, explain_contract
    console = Console()
    contract = get_contract(ident)
    if contract is not None:
        explain_contract(contract, console)
        return
    if ident in CLASSES:
        explain_class(CLASSES[ident], [c for c in load_suite() if c.cls == ident], console)
        return
    names = list(CLASSES) + [c.id for c in load_suite()]
    raise UsageError(f"no contract or class {ident!r}{did_you_mean(ident, names)}")


@main.command("schema")
def schema_command():
    """Print the JSON Schema of contract files (for editor validation)."""
    from ..language.schema import contract_schema
    click.echo(json.dumps(contract_schema(), indent=2))


@main.command("formats")
def formats_command():
    """The dtype facts: unit roundoff, eps, smallest subnormal, max."""
    from ..formats import table
    t = Table(title="formats", title_justify="left")
    for col in ("name", "p", "u", "eps", "smallest normal", "smallest subnormal", "max", "inf"):
        t.add_column(col, justify="right" if col not in ("name",) else "left")
    for r in table():
        t.add_row(r["name"], str(r["precision"]), f"{r['u']:.3e}", f"{r['eps']:.3e}",
                  f"{r['tiny']:.3e}", f"{r['smallest_subnormal']:.3e}", f"{r['max']:.4g}",
                  "yes" if r["has_inf"] else "no")
    Console().print(t)


def calibration_table(cals) -> Table:
    """One line per contract in 80 columns: the contract (its id names its class), the
    dtype, each calibration kernel's basic test (✓ passes, ✗ fails) and verdict, soundness."""
    from rich import box
    from ..formats import short_name
    t = Table(title="calibration matrix: basic functional test (✓ passes, ✗ fails) and the "
                    "contract's verdict", title_justify="left", box=box.SIMPLE_HEAD,
              pad_edge=False)
    for col in ("contract", "dtype", "baseline", "bad", "good", "sound", "time"):
        t.add_column(col, no_wrap=True, justify="right" if col == "time" else "left")
    for cal in cals:
        cells = {c.role: c for c in cal.cells}
        row = []
        for role in ("baseline", "bad", "good"):
            c = cells.get(role)
            if c is None:
                row.append(Text("—", style="dim"))
                continue
            short = {"violation": "viol", "error": "err"}.get(c.verdict, c.verdict or "-")
            row.append(Text(f"{'✓' if c.basic else '✗'} {short}",
                            style="green" if c.sound else "bold red"))
        sound = Text("sound" if cal.sound else ("ERROR: " + cal.error if cal.error else "UNSOUND"),
                     style="bold green" if cal.sound else "bold red")
        t.add_row(cal.contract.id, short_name(cal.dtype), *row, sound, f"{cal.seconds:.1f}s")
    return t


@main.command("calibrate")
@click.option("--class", "classes", multiple=True, help="only these classes (repeatable)")
@click.option("--op", "ops", multiple=True, help="only these ops (repeatable)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="write the matrix as JSON")
@click.option("--report", "html", type=click.Path(dir_okay=False), help="write the matrix as HTML")
def calibrate_command(classes, ops, json_path, html):
    """Run every contract against its baseline, bad and good kernels and the basic
    functional test; exit 1 unless every contract is soundly calibrated."""
    cals = run_calibration(list(classes), list(ops), Console(stderr=True))
    Console().print(calibration_table(cals))
    write_calibration(cals, json_path, html)
    unsound = [c for c in cals if not c.sound]
    click.echo(f"{len(cals) - len(unsound)} of {len(cals)} contracts soundly calibrated")
    sys.exit(EXIT_OK if cals and not unsound else EXIT_FAIL)


def run_calibration(classes, ops, console):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from ..check.calibrate import calibrate
    from ..suite import load_suite
    total = sum(1 for c in load_suite() if (not classes or c.cls in classes)
                and (not ops or c.op in ops))
    with Progress(TextColumn("calibrating {task.description}"), BarColumn(), MofNCompleteColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("", total=max(total, 1))
        return calibrate(classes or None, ops or None,
                         progress=lambda cal: bar.update(task, advance=1, description=cal.contract.id))


def write_calibration(cals, json_path=None, html=None):
    data = [c.to_json() for c in cals]
    if json_path:
        write_json(json_path, data)
    if html:
        from ..report import render_calibration_html
        write_text(html, render_calibration_html(data))


@main.command("demo")
@click.option("--out", default="out/demo", type=click.Path(file_okay=False), show_default=True,
              help="where the demo writes its reports")
@click.option("--skip-calibration", is_flag=True, help="only the case studies")
def demo_command(out, skip_calibration):
    """The three case studies and the calibration of the suite, with a summary."""
    from .demo import run_demo
    ok = run_demo(out, calibration=not skip_calibration, console=Console())
    sys.exit(EXIT_OK if ok else EXIT_FAIL)
