"""``kcontract trace MODEL.py`` and ``kcontract compare-traces A.kct B.kct``.

Exit codes: trace 0 when the trace is written (with ``--check``: 1 when an op violates
a contract); compare-traces 0 when no side violates a contract on its recorded inputs,
1 when one does; 2 a usage error.
"""
from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.text import Text

from ..language.claims import parse_declarations
from ..files import write_json, write_text
from . import EXIT_FAIL, EXIT_OK, main


@main.command("trace")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="the trace (.kct)")
@click.option("--framework", default="torch", show_default=True, help="the model's framework")
@click.option("--device", default="cpu", show_default=True, help="torch device string")
@click.option("--prelude", type=click.Path(dir_okay=False),
              help="a Python file run in the worker first, to configure the stack under test")
@click.option("--seed", default=0, type=int, show_default=True,
              help="torch seed for the weights (and, per trial, for get_inputs())")
@click.option("--trials", default=1, type=int, show_default=True,
              help="forward passes, each on get_inputs() under its own seed")
@click.option("--budget", default=64, type=int, show_default=True,
              help="MiB of tensors to keep (inputs and outputs of each op)")
@click.option("--label", help="the name of this stack in comparisons (default: the prelude's)")
@click.option("--declare", multiple=True, help="a claim KEY=VALUE the stack makes (repeatable)")
@click.option("--check", "run_check", is_flag=True,
              help="check every distinct (op, shape, dtype) against the suite at the model's "
                   "shapes, with the recorded inputs as an extra input family")
@click.option("--json", "json_out", type=click.Path(dir_okay=False),
              help="with --check: write the checks as JSON here")
def trace_command(model, out, framework, device, prelude, seed, trials, budget, label, declare,
                  run_check, json_out):
    """Run a KernelBench-format MODEL (Model, get_inputs, get_init_inputs) in an isolated
    worker and record every aten op call: op, shapes, dtypes, strides, module path, input
    and output summaries and hashes, and the tensors up to a size budget."""
    from ..trace import trace_model
    con = Console(highlight=False)
    declared = parse_declarations(declare)
    tr = trace_model(model, framework=framework, device=device, prelude=prelude, seed=seed,
                     trials=trials, budget=budget << 20, label=label, declare=declared)
    tr.save(out)
    cov = tr.manifest["coverage"]
    con.print(f"traced {tr.manifest['model']} on {device}"
              + (f" with prelude {tr.manifest['prelude']['file']}" if prelude else "")
              + f": {len(tr.ops)} aten op calls in {len(tr.trials)} trial(s) -> {out}")
    for t in tr.trials:
        if not t.ok:
            con.print(Text(f"  trial {t.index}: {t.describe()}", style="yellow"))
    con.print(f"coverage: {cov['covered']} of {cov['computing']} computing calls map to a "
              f"kcontract op ({100 * cov['share_covered']:.0f} %; {cov['checkable']} checkable); "
              f"{cov['data_movement']} calls only move data")
    for r in cov["ops"]:
        if r["state"] != "data movement":
            con.print(f"  {r['aten']:<52} {r['calls']:>5}  "
                      f"{(r['kcontract_op'] or '-'):<14} {r['state']}")
    if not run_check:
        sys.exit(EXIT_OK)
    from ..trace.check import check_trace
    res = check_trace(tr, device=device, prelude=prelude, declare=declared,
                      progress=lambda line: con.print(line))
    if json_out:
        write_json(json_out, res.to_json())
    con.print(res.summary())
    sys.exit(EXIT_FAIL if res.violations else EXIT_OK)


@main.command("compare-traces")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print the comparison as JSON")
@click.option("--report", type=click.Path(dir_okay=False), help="write the HTML report here")
@click.option("--labels", nargs=2, help="names for the two sides (default: the traces' labels)")
def compare_traces_command(a, b, as_json, report, labels):
    """Compare two traces of the same model: output agreement, the first op where the runs
    part beyond both sides' tolerances, divergence growth, and for each diverging op which
    side violates which contract on its recorded inputs (float64 oracle)."""
    from ..trace.compare import compare_traces
    from ..trace.report import render_html, summary_lines
    cmp = compare_traces(a, b, labels=tuple(labels) if labels else None)
    data = cmp.to_json()
    if report:
        write_text(report, render_html(data))
    if as_json:
        write_json("-", data)
    else:
        con = Console(highlight=False)
        for line in summary_lines(data):
            con.print(Text(line))
        if report:
            con.print(f"report: {report}")
    sys.exit(cmp.exit_code)
