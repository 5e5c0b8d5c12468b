"""kcontract trace: what recording costs, and how long checking a model's ops takes.

1. Tracing overhead: the demo model (examples/tiny_lm) forward pass in the trace worker,
   untraced and traced (every aten op recorded: summaries, hashes, tensors kept), side by
   side; per forward pass, median over the trials that ran to the end, the first trial
   (warm-up: torch's first dispatch mode imports torch._dynamo) left out.
2. The time to check every distinct (op, shape, dtype) of the demo model against the
   suite at its real shapes (``kcontract trace --check``), on the medium+clamp stack.
   Target: under 60 s on 2 cores.

torch runs with ``--threads`` threads (default 1) in every worker, set by a prelude that
then runs the stack's own: on a shared machine, torch's busy-waiting thread pool otherwise
measures the other processes' load more than the model.

Run: python benchmarks/bench_trace.py [--trials N] [--threads T]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "tiny_lm" / "model.py"
PRELUDE = ROOT / "examples" / "tiny_lm" / "stack_medium_clamp.py"


def per_forward(trace) -> float:
    times = [t.seconds for t in trace.trials[1:] if t.ok]
    return statistics.median(times) if times else float("nan")


def prelude(folder: str, threads: int, stack) -> str:
    """A prelude that sets torch's thread count, then runs the stack's prelude (if any)."""
    path = os.path.join(folder, f"threads_{threads}_{'stack' if stack else 'ref'}.py")
    with open(path, "w") as fh:
        fh.write(f"import runpy\nimport torch\ntorch.set_num_threads({threads})\n")
        if stack:
            fh.write(f"STACK = runpy.run_path({str(stack)!r})  # kept: its kernels live in it\n")
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_trace")
    from kcontract.trace import trace_model
    from kcontract.trace.check import check_trace
    print(f"tracing overhead (examples/tiny_lm, {args.trials} trials, {os.cpu_count()} cores, "
          f"{args.threads} torch thread(s))")
    rows = []
    for label, stack in (("reference", None), ("medium+clamp", PRELUDE)):
        pre = prelude(tmp, args.threads, stack)
        plain = trace_model(str(MODEL), prelude=pre, trials=args.trials, record=False)
        t0 = time.perf_counter()
        traced = trace_model(str(MODEL), prelude=pre, trials=args.trials)
        wall = time.perf_counter() - t0
        a, b = per_forward(plain), per_forward(traced)
        ops = len(traced.ops) / max(1, len(traced.trials))
        rows.append((label, a, b, ops, wall))
    print(f"{'stack':<14} {'untraced/forward':>17} {'traced/forward':>15} {'overhead':>9} "
          f"{'ops/forward':>12} {'trace wall':>11}")
    for label, a, b, ops, wall in rows:
        print(f"{label:<14} {a * 1e3:>14.2f} ms {b * 1e3:>12.2f} ms {b / a:>8.1f}x "
              f"{ops:>12.0f} {wall:>9.1f} s")
    pre = prelude(tmp, args.threads, PRELUDE)
    trace = trace_model(str(MODEL), prelude=pre, trials=2)
    t0 = time.perf_counter()
    res = check_trace(trace, prelude=pre)
    seconds = time.perf_counter() - t0
    print()
    print(res.summary())
    print(f"check every distinct op of the demo model: {seconds:.1f} s "
          f"(target < 60 s on 2 cores: {'met' if seconds < 60 else 'NOT met'})")


if __name__ == "__main__":
    main()
