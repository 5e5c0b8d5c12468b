"""``kcontract verify-matmul A B C``: Freivalds' check of a saved product."""
from __future__ import annotations

import sys

import click

from . import main


@main.command("verify-matmul")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.argument("c", type=click.Path(dir_okay=False))
@click.option("--rounds", default=1, type=int, show_default=True, help="independent random vectors")
@click.option("--seed", default=None, type=int, help="seed of the random vectors (default: fresh)")
@click.option("--accumulate", default=None, help="declared accumulator format (default: from the operands)")
@click.option("--output-format", default=None, help="format C was stored in before saving (e.g. bfloat16)")
@click.option("--false-alarm", default=1e-9, type=float, show_default=True,
              help="false-alarm probability the threshold is set for")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def verify_matmul_command(a, b, c, rounds, seed, accumulate, output_format, false_alarm, as_json):
    """Verify that C = A @ B (.npy, or .pt with torch) within the rounding-error model.

    Exit 0 verified, 1 failed (the suspect elements are listed), 2 bad input.
    """
    from ..freivalds import verify_matmul_files
    sys.exit(verify_matmul_files(a, b, c, rounds=rounds, seed=seed, accumulate=accumulate,
                                 as_json=as_json, output_format=output_format,
                                 false_alarm=false_alarm))
