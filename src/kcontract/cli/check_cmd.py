"""``kcontract check``: run a kernel against the suite (or a contract file)."""
from __future__ import annotations

import os
import sys

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .. import report as _report  # noqa: F401 - imported before any kernel runs
from ..records import store as _store  # noqa: F401 - likewise
from ..language.claims import parse_declarations
from ..adapters import FRAMEWORKS
from ..errors import UsageError
from ..files import write_json
from . import main
from .render import print_run


def _progress(console: Console, total: int):
    return Progress(TextColumn("[bold]checking[/bold] {task.description}"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True,
                    disable=not console.is_terminal)


def run_check(kernel, *, op, dtype, framework, device, classes, declared, seed, in_process,
              timeout, contracts=None, console=None, reproduce_prefix=None):
    """The check with a progress bar; returns the RunResult."""
    from ..check.runner import check, select_contracts
    console = console or Console(stderr=True)
    chosen = select_contracts(op, dtype, framework, classes, contracts)
    with _progress(console, len(chosen)) as bar:
        task = bar.add_task("", total=max(len(chosen), 1))

        def tick(cid, step):
            if step == 0:
                bar.advance(task)
            bar.update(task, description=cid)
        return check(kernel, op=op, dtype=dtype, framework=framework, device=device,
                     classes=classes, declare=declared, seed=seed, in_process=in_process,
                     timeout=timeout, contracts=contracts, progress=tick,
                     reproduce_prefix=reproduce_prefix, hints=True)


def emit_outputs(run, *, json_path=None, html=None, junit=None, markdown=None, store=None,
                 no_store=False, quiet=False) -> None:
    """Terminal table, JSON, reports and the results store: everything a run writes."""
    data = run.to_json()
    if not quiet:
        print_run(data, Console())
    if json_path:
        write_json(json_path, data)
    if html or junit or markdown:
        from ..report import write_reports
        write_reports(data, html=html, junit=junit, markdown=markdown)
    if not no_store:
        from ..records.store import StoreError, record_run
        try:
            record_run(data, store)
        except StoreError as exc:
            click.echo(f"warning: run not recorded in the results store: {exc}", err=True)


@main.command("check", context_settings={"show_default": True})
@click.argument("kernel")
@click.option("--op", help="the op the kernel implements (kcontract list shows them), or a "
                           "user-defined op: path/to/ops.py:NAME or module:NAME")
@click.option("--dtype", help="the kernel's dtype: float64 float32 float16 bfloat16 float8_e4m3fn float8_e5m2")
@click.option("--framework", default="numpy", help="a registered framework: " + ", ".join(FRAMEWORKS))
@click.option("--device", default="cpu", help="torch device string (cuda, mps, xpu, ...)")
@click.option("--contract", "classes", multiple=True, help="contract class ID or contract id (repeatable); default: all that apply")
@click.option("--declare", multiple=True, help="a claim KEY=VALUE (repeatable), e.g. accumulate=float32")
@click.option("--seed", default="0", metavar="N|random",
              help="added to every contract's seeds; 'random' draws a secret one for this run "
                   "(printed afterwards, so a failure still reproduces)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="write the run as JSON")
@click.option("--report", "html", type=click.Path(dir_okay=False), help="write a self-contained HTML report")
@click.option("--junit", type=click.Path(dir_okay=False), help="write JUnit XML")
@click.option("--markdown", type=click.Path(dir_okay=False), help="write a Markdown summary")
@click.option("--store", type=click.Path(dir_okay=False), default=None,
              help="results database (default ~/.kcontract/results.db or $KCONTRACT_STORE)")
@click.option("--no-store", is_flag=True, help="do not record the run")
@click.option("--in-process", is_flag=True, help="run the kernel in this process (debugging; no isolation)")
@click.option("--timeout", default=60.0, type=click.FloatRange(min=0, min_open=True),
              help="seconds allowed per kernel call")
@click.option("-q", "--quiet", is_flag=True, help="no terminal table")
def check_command(kernel, op, dtype, framework, device, classes, declare, seed, json_path, html,
                  junit, markdown, store, no_store, in_process, timeout, quiet):
    """Check KERNEL (path/to/file.py:function or package.module:function) against the
    contracts of --op at --dtype; or check FILE.yaml, a contract file naming its kernel.

    Exit 0: every contract passes. 1: a violation. 4: a kernel error (it raised,
    crashed, hung, returned the wrong shape or dtype). 2: usage or contract-file error,
    or nothing was checked (every selected contract skipped). 3: a bug in the checker.
    """
    declared = parse_declarations(declare)
    seed, secret = parse_seed(seed)
    contracts = None
    prefix = None
    if kernel.endswith((".yaml", ".yml")):
        kernel_file = kernel
        from ..language.loader import load_check_file
        spec = load_check_file(kernel)
        if not spec.kernel:
            raise UsageError(f"{kernel} names no kernel (add `kernel: path/to/file.py:function`)")
        ops = sorted({c.op for c in spec.contracts if not c.generic})
        if len(ops) > 1:
            raise UsageError(f"{kernel}: a check file's contracts must share one op, got {ops}")
        if ops:
            if op and op != ops[0] and _op_name(op) != ops[0]:
                raise UsageError(f"--op {op} contradicts the contract file's op {ops[0]}")
            op = ops[0]
        elif not op:
            raise UsageError(f"{kernel}: its contracts are generic (scope.op: any); name the "
                             f"op with --op")
        base = os.path.dirname(os.path.abspath(kernel))
        target = spec.kernel
        path_part = target.rpartition(":")[0]
        if path_part.endswith(".py") and not os.path.isabs(path_part):
            target = os.path.join(base, path_part) + ":" + target.rpartition(":")[2]
        kernel = target
        dtype = dtype or spec.dtype or spec.contracts[0].scope.dtypes[0]
        if framework == "numpy" and spec.framework:
            framework = spec.framework
        if device == "cpu" and spec.device:
            device = spec.device
        merged = {k: str(v).lower() if isinstance(v, bool) else str(v)
                  for k, v in (spec.declare or {}).items()}
        merged.update(declared)
        declared = merged
        contracts = list(spec.contracts)
        prefix = f"kcontract check {kernel_file}"
    if not op:
        raise UsageError("--op is required (one of: " + _ops() + ")")
    if not dtype:
        raise UsageError("--dtype is required")
    run = run_check(kernel, op=op, dtype=dtype, framework=framework, device=device,
                    classes=list(classes), declared=declared, seed=seed, in_process=in_process,
                    timeout=timeout, contracts=contracts, reproduce_prefix=prefix)
    emit_outputs(run, json_path=json_path, html=html, junit=junit, markdown=markdown,
                 store=store, no_store=no_store, quiet=quiet)
    if secret:
        click.echo(f"secret seed of this run: {seed} (rerun with --seed {seed})", err=True)
    why = run.nothing_checked()
    if why is not None:
        raise UsageError(f"nothing was checked: every selected contract was skipped ({why})")
    sys.exit(run.exit_code)


def parse_seed(text) -> tuple[int, bool]:
    """``--seed``: an integer, or ``random`` for a secret seed drawn for this run (the kernel
    cannot know the inputs in advance from the suite's public seeds). (seed, secret)."""
    if str(text).strip().lower() == "random":
        import secrets
        return secrets.randbelow(2**31 - 1) + 1, True
    try:
        return int(text), False
    except ValueError:
        raise UsageError(f"--seed must be an integer or 'random', not {text!r}") from None


def _ops() -> str:
    from ..ops import known_names
    return ", ".join(known_names()) + ", or a user-defined op path/to/ops.py:NAME"


def _op_name(op: str) -> str:
    from ..ops import get_op
    return get_op(op).name
