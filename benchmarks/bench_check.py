"""Wall time of ``kcontract check`` on a numpy float32 matmul kernel with every
applicable contract, and where the time goes: the kernel, the oracle, the
worker round trips, and the checker's own overhead (input generation, tolerance
evaluation, detectors, process start); and the cost of the operating-system
sandbox: the same check with workers under bubblewrap and without a sandbox,
side by side.

Targets: under 10 s on a 2-core CPU; the sandbox at most 0.3 s more per check.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
import time

KERNEL = textwrap.dedent('''
    import numpy as np
    def matmul(a, b):
        return np.matmul(a, b)
''')


def fp_read_seconds():
    """The parent's read of a worker's FP control registers, as the checker makes it after
    every judged call, timed on a plain child process (None where it cannot read)."""
    import subprocess
    from kcontract.check import fpstate
    if not fpstate.supported():
        return None
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        times = []
        for _ in range(200):
            t0 = time.perf_counter()
            if fpstate.read_threads(child.pid, only=(child.pid,)) is None:
                return None
            times.append(time.perf_counter() - t0)
        return statistics.median(times)
    finally:
        child.stdin.close()
        child.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from kcontract.check.jail import Sandbox, detect
    from kcontract.check.runner import check
    boxed = detect()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.py")
        with open(path, "w") as fh:
            fh.write(KERNEL)
        walls, runs, plain = [], [], []
        for _ in range(args.repeat):  # interleaved, so load on the machine hits both alike
            t0 = time.perf_counter()
            run = check(f"{path}:matmul", op="matmul", dtype="float32", sandbox=boxed)
            walls.append(time.perf_counter() - t0)
            runs.append(run)
            t0 = time.perf_counter()
            check(f"{path}:matmul", op="matmul", dtype="float32", sandbox=Sandbox("none"))
            plain.append(time.perf_counter() - t0)
    run = runs[walls.index(statistics.median(walls))] if len(walls) % 2 else runs[-1]
    wall = statistics.median(walls)
    t = run.timings
    kernel, call, oracle = t.get("kernel", 0.0), t.get("call", 0.0), t.get("oracle", 0.0)
    transfer = max(call - kernel, 0.0)
    own = max(wall - call - oracle, 0.0)
    print(f"limits: " + ", ".join(f"{k} {v.get('enforced')}" for k, v in run.limits.items())
          + f"; floating-point state read by: {run.fp_state}")
    print(f"kcontract check, numpy float32 matmul, {len(run.results)} contracts "
          f"({sum(r.cases for r in run.results)} kernel calls), verdict {run.verdict}")
    print(f"  wall time (median of {args.repeat}): {wall:6.2f} s   target < 10 s: "
          f"{'met' if wall < 10 else 'NOT met'}")
    for name, val in (("kernel", kernel), ("worker round trips (transfer, checks)", transfer),
                      ("oracle (float64)", oracle), ("checker's own (inputs, tolerances, "
                                                     "detectors, process start)", own)):
        print(f"  {name:58s} {val:6.2f} s  {100 * val / wall:5.1f} %")
    extra = wall - statistics.median(plain)
    print(f"  sandbox cost: {boxed.name} {wall:6.2f} s   none {statistics.median(plain):6.2f} s   "
          f"difference {extra:+6.2f} s per check   target <= +0.30 s: "
          f"{'met' if extra <= 0.3 else 'NOT met'}"
          + ("" if boxed.isolated else "   (bubblewrap unavailable: both ran unsandboxed)"))
    read = fp_read_seconds()
    if read is not None:
        print(f"  FP-register read (ptrace, the calling thread of a plain child): "
              f"{1e3 * read:.3f} ms per judged call (median of 200)")
    print("  per contract:")
    for r in run.results:
        print(f"    {r.contract:9s} {r.id:22s} {r.verdict.value:9s} {r.seconds:6.2f} s  {r.cases} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
