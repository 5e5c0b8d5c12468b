"""Run the whole normative suite against torch's own kernels, every op and dtype.

    python survey.py [--device cpu] [--dtype float32 --dtype bfloat16 ...] [--json out.json]

Prints one row per (op, dtype): the verdict, and for each broken contract its id and
message. Exit 0 whatever the verdicts: this is a survey, not a gate.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.progress import track
from rich.table import Table

from kcontract.check.runner import check

OPS = ("matmul", "sum", "softmax", "layernorm", "attention", "embedding", "gelu",
       "linear_gelu", "cast")
KERNELS = Path(__file__).resolve().parent / "kernels.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", action="append", dest="dtypes")
    ap.add_argument("--json", help="write every run's JSON here")
    args = ap.parse_args()
    dtypes = args.dtypes or ["float32", "bfloat16", "float16"]
    console = Console()
    table = Table(title=f"the normative suite on torch's own kernels ({args.device})",
                  title_justify="left")
    for col in ("op", "dtype", "verdict", "broken contracts"):
        table.add_column(col)
    runs = []
    jobs = [(op, dt) for op in OPS for dt in dtypes]
    for op, dt in track(jobs, description="checking", console=console):
        run = check(f"{KERNELS}:{op}", op=op, dtype=dt, framework="torch", device=args.device)
        data = run.to_json()
        runs.append(data)
        broken = [f"{r['id']}: {r['message']}" for r in data["results"]
                  if r["verdict"] in ("violation", "error")]
        style = "green" if data["verdict"] == "conformant" else "bold red"
        table.add_row(op, dt, f"[{style}]{data['verdict']}[/]", "\n".join(broken) or "-")
    console.print(table)
    env = runs[0]["environment"] if runs else {}
    console.print(f"torch {env.get('torch', env.get('framework_version', '?'))}, "
                  f"{env.get('device_name', args.device)}")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
