"""The survey's wall time serially, with --workers 2 and on a local Ray cluster, side by
side (each must give the same matrix), and Ray's overhead per task.

    python benchmarks/bench_survey.py [--framework numpy] [--ops sum,embedding,...]
                                      [--dtypes float32,float16] [--workers 2] [--tasks 50]

Ray's start-up (``ray.init`` of a local cluster) is reported on its own line and not
counted in the Ray survey's wall time; the overhead per task is measured on empty tasks
(submit, schedule, run, return) on that running cluster.
"""
from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", default="numpy")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ops", default="", help="comma-separated; default: every op the table covers")
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=50, help="empty Ray tasks for the overhead")
    args = ap.parse_args()

    from kcontract.survey import Processes, Ray, Serial, load_table, survey
    ops = [o for o in args.ops.split(",") if o] or list(load_table(args.framework).entries)
    dtypes = [d for d in args.dtypes.split(",") if d]
    common = dict(ops=ops, dtypes=dtypes, record_runs=False)
    rows = []

    t0 = time.perf_counter()
    serial = survey(args.framework, args.device, executor=Serial(), **common)
    rows.append(("serial", time.perf_counter() - t0, serial))
    t0 = time.perf_counter()
    par = survey(args.framework, args.device, executor=Processes(args.workers), **common)
    rows.append((f"--workers {args.workers}", time.perf_counter() - t0, par))

    import ray
    t0 = time.perf_counter()
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        on_ray = survey(args.framework, args.device, executor=Ray(), **common)
        rows.append((f"--ray local ({args.workers} CPUs)", time.perf_counter() - t0, on_ray))

        @ray.remote(num_cpus=1)
        def empty(i):
            return i
        ray.get([empty.remote(i) for i in range(args.workers * 2)])  # workers started
        t0 = time.perf_counter()
        for i in range(args.tasks):
            ray.get(empty.remote(i))
        per_task_serial = (time.perf_counter() - t0) / args.tasks
        t0 = time.perf_counter()
        ray.get([empty.remote(i) for i in range(args.tasks)])
        per_task_batch = (time.perf_counter() - t0) / args.tasks
    finally:
        ray.shutdown()

    cells = sum(1 for c in serial.cells.values() if c.status == "checked")
    print(f"kcontract survey --framework {args.framework} --device {args.device}: "
          f"{len(ops)} ops x {len(dtypes)} dtypes, {cells} cells checked "
          f"({os.cpu_count()} CPUs here)")
    print(f"  {'executor':26s} {'wall s':>8s} {'s/cell':>8s} {'speed-up':>9s}  same matrix as serial")
    base = rows[0][1]
    for name, wall, m in rows:
        same = "yes" if m.outcome() == serial.outcome() else "NO"
        print(f"  {name:26s} {wall:8.2f} {wall / max(cells, 1):8.2f} {base / wall:8.2f}x  {same}")
    print(f"  Ray local cluster start-up: {ray_start:.2f} s (not in the wall time above)")
    print(f"  Ray overhead per empty task: {per_task_serial * 1e3:.1f} ms one at a time, "
          f"{per_task_batch * 1e3:.1f} ms each in a batch of {args.tasks}")
    return 0 if all(m.outcome() == serial.outcome() for _, _, m in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
