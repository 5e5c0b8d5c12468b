"""``kcontract fingerprint``: what a kernel's reduction really computes."""
from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..files import write_json
from . import EXIT_FAIL, EXIT_OK, main

LABELS = {"operand_format": "operand format", "operand_rounding": "operand rounding",
          "products": "products", "accumulator_bits": "accumulator bits",
          "accumulator_rounding": "accumulator rounding", "fused_group": "fused group",
          "promotion_interval": "promotion interval", "workspace_interval": "workspace after",
          "workspace_bits": "workspace bits", "subnormal_inputs": "subnormal inputs",
          "subnormal_outputs": "subnormal outputs", "reduction_order": "reduction order",
          "score_operand_format": "q, k format", "score_bits": "score bits"}


def _value(name, value) -> str:
    if value is None:
        return {"promotion_interval": "never", "operand_rounding": "none",
                "workspace_interval": "none", "workspace_bits": "none",
                "reduction_order": "not identified"}.get(name, "-")
    return str(value)


def _conf_style(c: float) -> str:
    return "green" if c >= 0.99 else "yellow" if c >= 0.8 else "red"


def print_recipe(recipe, console: Console, title: str = "") -> None:
    t = Table(title=title or None, title_justify="left", show_lines=False)
    t.add_column("field")
    t.add_column("value", style="bold")
    t.add_column("confidence", justify="right")
    t.add_column("evidence", overflow="fold", max_width=78)
    for name, f in recipe.fields.items():
        alt = f" (also: {', '.join(str(a) for a in f.alternatives)})" if f.alternatives else ""
        if not f.measured and f.value is None:
            t.add_row(LABELS.get(name, name), Text("not measurable", style="dim"), "",
                      f.evidence.removeprefix("not measurable: "))
            continue
        t.add_row(LABELS.get(name, name), _value(name, f.value) + alt,
                  Text(f"{f.confidence:.0%}", style=_conf_style(f.confidence)), f.evidence)
    console.print(t)
    s = Table(title="error against the reduction length (rms |out - exact| / (|a| @ |b|))",
              title_justify="left")
    s.add_column("K", justify="right")
    s.add_column("measured", justify="right")
    for label in (recipe.sweep[0].predicted if recipe.sweep else {}):
        s.add_column(label, justify="right")
    s.add_column("bit for bit", justify="right")
    for p in recipe.sweep:
        s.add_row(str(p.length), f"{p.measured:.3g}", *[f"{v:.3g}" for v in p.predicted.values()],
                  f"{p.bitwise:.1%}")
    console.print(s)
    console.print(Text(f"recipe: {recipe.summary()}", style="bold"))
    console.print(f"the recovered design reproduces {recipe.probes_reproduced:.1%} of the probe "
                  f"rows; {recipe.calls} calls, {recipe.seconds:.1f} s; "
                  f"{recipe.input_format} in, {recipe.output_format} out")


@main.command("fingerprint", context_settings={"show_default": True})
@click.argument("kernel")
@click.option("--op", required=True, help="the op the kernel implements: matmul, scaled_matmul "
                                          "(called as (a, b)), sum, linear_gelu or attention")
@click.option("--dtype", required=True, help="the kernel's input dtype (float32, bfloat16, float16, "
                                             "float8_e4m3fn, float8_e5m2)")
@click.option("--framework", default="numpy", help="numpy or torch")
@click.option("--device", default="cpu", help="torch device string (cuda, ...)")
@click.option("--json", "json_path", type=click.Path(dir_okay=False),
              help="write the recipe as JSON")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="write the error sweep (measured beside each design) as SVG")
@click.option("--timeout", default=60.0, help="seconds one kernel call may take")
@click.option("--in-process", is_flag=True, help="run the kernel in this process (no isolation)")
def fingerprint_cmd(kernel, op, dtype, framework, device, json_path, plot_path, timeout,
                    in_process):
    """Recover what KERNEL's reduction computes: operand format, accumulator bits and
    rounding, fused group size, promotion interval, subnormals, order.

    The kernel runs in its own worker process, like a check; every field comes with a
    confidence (the share of probe rows the value reproduces bit for bit) and its evidence.
    """
    from ..fingerprint import ProbeFailure, fingerprint
    console = Console()
    try:
        recipe = fingerprint(kernel, op=op, dtype=dtype, framework=framework, device=device,
                             timeout=timeout, in_process=in_process)
    except ProbeFailure as exc:
        click.echo(f"error: the kernel failed on a probe: {exc}", err=True)
        sys.exit(EXIT_FAIL)
    print_recipe(recipe, console, f"{kernel}  op={op} dtype={dtype} framework={framework} "
                                  f"device={device}")
    if json_path:
        data = recipe.as_dict()
        data.update({"kernel": kernel, "framework": framework, "device": device})
        write_json(json_path, data)
    if plot_path:
        from ..files import write_text
        from ..fingerprint.plot import sweep_svg
        write_text(plot_path, sweep_svg(recipe))
    sys.exit(EXIT_OK)
