"""``kcontract kernelbench``: check KernelBench candidates against their problem."""
from __future__ import annotations

import os
import sys
from contextlib import nullcontext
from typing import Sequence

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..language.claims import parse_declarations
from ..errors import UsageError
from ..files import write_json, write_text
from . import EXIT_FAIL, EXIT_OK, main
from .render import STYLE, print_run


def comparison_rows(runs: Sequence) -> list[dict]:
    """One row per candidate: KernelBench's verdict beside kcontract's."""
    rows = []
    for r in runs:
        kb = r.kernelbench or {}
        rows.append({"problem": r.problem, "candidate": os.path.basename(r.candidate),
                     "kernelbench": "pass" if kb.get("passed") else "fail",
                     "kernelbench_detail": (f"{kb.get('passed_trials', 0)}/{kb.get('trials', 0)} "
                                            f"trials, max diff {kb.get('max_difference', 0):.2g}")
                     if kb.get("passed") else (kb.get("message") or "failed"),
                     "kcontract": r.verdict, "failing": list(r.failing),
                     "causes": _causes(r.run)})
    return rows


def _causes(run) -> str:
    """The run's primary causes by class, with how many violations follow from them."""
    diag = run.diagnosed()
    if diag.empty:
        return "-"
    text = ", ".join(c.cls if c.kind != "error" else "kernel error" for c in diag.primary)
    return text + (f" (+{len(diag.explained)} following)" if diag.explained else "")


def comparison_table(runs: Sequence, dtype: str) -> Table:
    from ..integrations.kernelbench.check import KERNELBENCH_TOLERANCE, KERNELBENCH_TRIALS
    tol = KERNELBENCH_TOLERANCE[dtype]
    t = Table(title=f"KernelBench's check (allclose atol=rtol={tol:g}, {KERNELBENCH_TRIALS} trials, "
                    f"its one shape and inputs) beside kcontract", title_justify="left")
    for col in ("problem", "candidate", "KernelBench", "kcontract", "primary cause",
                "failing classes / codes"):
        t.add_column(col, overflow="fold")
    for row in comparison_rows(runs):
        kb = Text(row["kernelbench"], style="green" if row["kernelbench"] == "pass" else "red")
        kc = Text(row["kcontract"], style=STYLE.get(row["kcontract"], "bold red"))
        t.add_row(row["problem"], row["candidate"], kb, kc, row["causes"],
                  ", ".join(row["failing"]) or "-")
    return t


def comparison_markdown(runs: Sequence, dtype: str) -> str:
    from ..integrations.kernelbench.check import KERNELBENCH_TOLERANCE, KERNELBENCH_TRIALS
    tol = KERNELBENCH_TOLERANCE[dtype]
    lines = [f"| problem | candidate | KernelBench (atol=rtol={tol:g}, {KERNELBENCH_TRIALS} trials) "
             f"| kcontract | primary cause | failing classes / codes |",
             "|---|---|---|---|---|---|"]
    for row in comparison_rows(runs):
        lines.append(f"| {row['problem']} | {row['candidate']} | {row['kernelbench']} | "
                     f"{row['kcontract']} | {row['causes']} | {', '.join(row['failing']) or '-'} |")
    return "\n".join(lines) + "\n"


def summary_line(runs: Sequence) -> str:
    fooled = [r for r in runs if (r.kernelbench or {}).get("passed") and r.verdict != "conformant"]
    return (f"{len(fooled)} of {len(runs)} candidates pass KernelBench's check but break a "
            f"contract" + (f": {', '.join(os.path.basename(r.candidate) for r in fooled)}"
                           if fooled else ""))


@main.command("kernelbench", context_settings={"show_default": True})
@click.argument("reference", type=click.Path(exists=True, dir_okay=False))
@click.argument("candidates", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--dtype", default="float32", help="float32, float16 or bfloat16")
@click.option("--device", default="cpu", help="torch device string (cuda, mps, ...)")
@click.option("--contract", "classes", multiple=True,
              help="only this class (repeatable): C-PRC-01 C-PRC-02 C-ORD-02 C-EXC-01 C-CMP-03")
@click.option("--declare", multiple=True, help="a claim KEY=VALUE, e.g. deterministic=false")
@click.option("--seed", type=int, default=None,
              help="fix the seed (default: a secret one drawn per run, printed afterwards)")
@click.option("--timeout", default=60.0, type=float, help="seconds allowed per call")
@click.option("--no-kernelbench", "skip_kb", is_flag=True, help="do not run KernelBench's own check")
@click.option("--scale", default=1.0, type=float,
              help="shrink every size of the problem by this factor (0 < F <= 1), "
                   "consistently: tuples and sizes derived at import follow")
@click.option("--max-elements", type=int, default=None,
              help="shrink the sizes until no input or weight holds more elements than this")
@click.option("--train", is_flag=True,
              help="check training mode (dropout on) with the same RNG seed on both sides "
                   "before every forward pass; the default is eval mode")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="write the runs as JSON")
@click.option("--markdown", type=click.Path(dir_okay=False), help="write the comparison table")
@click.option("-v", "--verbose", is_flag=True, help="every candidate's full verdict table")
def kernelbench_command(reference, candidates, dtype, device, classes, declare, seed, timeout,
                        skip_kb, scale, max_elements, train, json_path, markdown, verbose):
    """Check KernelBench candidates (files defining ModelNew) against REFERENCE (a
    problem file: Model, get_inputs, get_init_inputs), and show beside each what
    KernelBench's own check says.

    Exit 0: every candidate conforms. 1: a violation or error. 2: usage error.
    """
    from ..integrations.kernelbench.check import check_kernelbench, load_problem
    declared = parse_declarations(declare)
    problem = load_problem(reference, scale, max_elements)  # once, before any candidate runs
    if problem.scaling.reduced:
        Console(stderr=True).print(f"{problem.name}: {problem.scaling.describe()}")
    console = Console()
    err = Console(stderr=True)
    runs = []
    for cand in candidates:
        with err.status(f"checking {os.path.basename(cand)}", spinner="dots") if err.is_terminal \
                else nullcontext():
            run = check_kernelbench(reference, cand, dtype=dtype, device=device,
                                    classes=list(classes) or None, declare=declared, seed=seed,
                                    timeout=timeout, kernelbench=not skip_kb, problem=problem,
                                    train=train)
        runs.append(run)
        if verbose or len(candidates) == 1:
            print_run(run.run.to_json(), console)
            if not skip_kb:
                kb = run.kernelbench
                console.print(f"KernelBench's check: {'pass' if kb.get('passed') else 'fail'}"
                              f" ({kb.get('passed_trials', 0)}/{kb.get('trials', 0)} trials"
                              f"{'; ' + kb['message'] if kb.get('message') else ''})")
            if run.scaling.reduced:
                console.print(run.scaling.describe())
            console.print(f"seed {run.seed} (rerun with --seed {run.seed})")
            console.print()
    if not skip_kb:
        console.print(comparison_table(runs, dtype))
        console.print(summary_line(runs))
    if json_path:
        write_json(json_path, {"schema": "kcontract.kernelbench-runs/1",
                               "runs": [r.to_json() for r in runs]})
    if markdown:
        write_text(markdown, comparison_markdown(runs, dtype))
    empty = [f"{os.path.basename(r.candidate)} ({r.run.nothing_checked()})" for r in runs
             if r.run.nothing_checked() is not None]
    if empty:
        raise UsageError("nothing was checked for " + "; ".join(empty))
    sys.exit(EXIT_OK if all(r.verdict == "conformant" for r in runs) else EXIT_FAIL)
