"""``kcontract survey``: a backend's own ops against the suite, as a conformance matrix."""
from __future__ import annotations

import sys

import click
from rich.console import Console

from ..language.claims import parse_declarations
from ..errors import UsageError
from ..files import load_json, write_json, write_text
from . import EXIT_FAIL, EXIT_OK, main


def _split(values) -> list[str]:
    return [v.strip() for text in values for v in str(text).split(",") if v.strip()]


def _resources(values) -> dict:
    out = {}
    for text in values:
        name, sep, amount = str(text).partition("=")
        try:
            out[name.strip()] = float(amount) if sep else 1.0
        except ValueError:
            raise UsageError(f"--ray-resource {text!r}: expected NAME or NAME=AMOUNT") from None
    return out


@main.command("survey", context_settings={"show_default": True})
@click.option("--framework", help="the backend: numpy, torch or jax (a framework with a survey table)")
@click.option("--device", default="cpu", help="the framework's device name (torch cuda, jax gpu, ...)")
@click.option("--ops", multiple=True, help="ops to survey (comma-separated or repeated); default: every op of the suite")
@click.option("--dtypes", multiple=True, help="dtypes (comma-separated or repeated); default: those the table surveys")
@click.option("--contract", "classes", multiple=True, help="only these contract classes (repeatable)")
@click.option("--declare", multiple=True, help="a claim KEY=VALUE for every cell (repeatable), e.g. subnormals=flush")
@click.option("--seed", default=0, type=int, help="added to every contract's seeds")
@click.option("--timeout", default=60.0, type=click.FloatRange(min=0, min_open=True),
              help="seconds allowed per kernel call")
@click.option("--workers", default=1, type=click.IntRange(min=1), help="processes on this machine")
@click.option("--ray", "ray_address", metavar="ADDRESS|local",
              help="run each cell as a Ray task: on a running cluster, or 'local' to start one")
@click.option("--ray-resource", "ray_resources", multiple=True, metavar="NAME[=AMOUNT]",
              help="a custom Ray resource every cell requests (repeatable)")
@click.option("--retries", default=2, type=click.IntRange(min=0),
              help="times a cell whose process or node died is run again before it is reported lost")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="write the matrix as JSON")
@click.option("--html", type=click.Path(dir_okay=False), help="write the HTML heat map")
@click.option("--store", type=click.Path(dir_okay=False), default=None,
              help="results database (default ~/.kcontract/results.db or $KCONTRACT_STORE)")
@click.option("--no-store", is_flag=True, help="do not record the cells' runs")
@click.option("--compare", "compare_paths", nargs=2, type=click.Path(dir_okay=False),
              metavar="A.json B.json", help="two surveys side by side, differences first")
@click.option("--differences-only", is_flag=True, help="with --compare: only the entries that differ")
@click.option("-q", "--quiet", is_flag=True, help="no terminal table")
def survey_command(framework, device, ops, dtypes, classes, declare, seed, timeout, workers, ray_address,
                   ray_resources, retries, json_path, html, store, no_store, compare_paths,
                   differences_only, quiet):
    """Check a framework's own implementation of every op of the suite, at every dtype,
    against every applicable contract: a conformance matrix of ops x dtypes x classes.

    Exit 0: every checked cell conforms. 1: a violation, an error or a lost cell.
    2: usage error.
    """
    from ..survey import Processes, Ray, Serial, SurveyMatrix, compare, survey
    from ..survey.render import matrix_html, print_compare, print_matrix
    console = Console()
    if compare_paths:
        a, b = (SurveyMatrix.from_json(load_json(p, "survey"), p) for p in compare_paths)
        rows = compare(a, b)
        labels = (a.label, b.label) if a.label != b.label else tuple(compare_paths)
        print_compare(a, b, rows, console, all_rows=not differences_only, labels=labels)
        sys.exit(EXIT_OK)
    if not framework:
        raise UsageError("--framework is required (or --compare A.json B.json)")
    if ray_address and workers > 1:
        raise UsageError("--workers and --ray are two ways to fan out: choose one")
    if ray_address:
        executor = Ray(ray_address, retries=retries, resources=_resources(ray_resources))
    elif ray_resources:
        raise UsageError("--ray-resource needs --ray")
    elif workers > 1:
        executor = Processes(workers, retries=retries)
    else:
        executor = Serial()
    err = Console(stderr=True)
    with err.status("surveying") as status:
        done = []

        def tick(res):
            done.append(res)
            status.update(f"surveyed {len(done)} cells (last: {res.op} {res.dtype}: "
                          f"{res.verdict or res.status})")
        m = survey(framework, device, ops=_split(ops) or None, dtypes=_split(dtypes) or None,
                   classes=tuple(classes), declare=parse_declarations(declare), seed=seed,
                   timeout=timeout, executor=executor,
                   store=store, record_runs=not no_store, progress=tick)
    if not quiet:
        print_matrix(m, console)
    if json_path:
        write_json(json_path, m.to_json())
    if html:
        write_text(html, matrix_html(m))
    bad = any(c.verdict in ("violation", "error") or c.status == "lost" for c in m.cells.values())
    sys.exit(EXIT_FAIL if bad else EXIT_OK)
