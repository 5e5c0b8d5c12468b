"""``kcontract kernelbench --scale F`` on a level-1-sized problem: wall time, peak memory
(checker and candidate worker, resident set) and verdict at several scales, side by side.

The problem is KernelBench level 1 problem 40 (LayerNorm) at the benchmark's own sizes,
``16 x 64 x 256 x 256`` (67M elements per input); the candidate an honest two-pass
re-implementation.  Each scale runs in a fresh process so that its peak is its own.

    python benchmarks/bench_kernelbench_scale.py                 # 1/32 .. 1/4
    python benchmarks/bench_kernelbench_scale.py --scales 0.125 0.5 1
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

PROBLEM = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 16
features = 64
dim1 = 256
dim2 = 256


def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [(features, dim1, dim2)]
'''

CANDIDATE = '''\
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)
        self.dims = tuple(range(-len(normalized_shape), 0))

    def forward(self, x):
        mean = x.mean(dim=self.dims, keepdim=True)
        c = x - mean
        var = (c * c).mean(dim=self.dims, keepdim=True)
        return c * torch.rsqrt(var + self.ln.eps) * self.ln.weight + self.ln.bias
'''

ONE = textwrap.dedent('''\
    import json, resource, sys, time
    from kcontract.integrations.kernelbench.check import check_kernelbench, load_problem
    from kcontract.integrations.kernelbench.scale import largest_input
    ref, cand, scale = sys.argv[1], sys.argv[2], float(sys.argv[3])
    t0 = time.perf_counter()
    p = load_problem(ref, scale)
    run = check_kernelbench(ref, cand, seed=1, problem=p, kernelbench=False,
                            timeout=600.0)
    wall = time.perf_counter() - t0
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kid = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"scale": scale, "elements": largest_input(p.module), "seconds": wall,
                      "checker_mib": own, "worker_mib": kid, "verdict": run.verdict,
                      "failing": run.failing}))
''')


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scales", type=float, nargs="+", default=[0.03125, 0.0625, 0.125, 0.25])
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per scale")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ref, cand = os.path.join(tmp, "problem.py"), os.path.join(tmp, "new_honest.py")
        with open(ref, "w") as fh:
            fh.write(PROBLEM)
        with open(cand, "w") as fh:
            fh.write(CANDIDATE)
        print("kcontract kernelbench on KernelBench level 1 problem 40 (LayerNorm, "
              "16x64x256x256 at scale 1), honest candidate, every class")
        load = os.getloadavg()
        print(f"  at load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs "
              "(1, 5, 15 min): the times are this machine's under that load")
        print(f"  {'scale':>8s} {'elements':>10s} {'seconds':>9s} {'checker MiB':>12s} "
              f"{'worker MiB':>11s}  verdict")
        for scale in args.scales:
            try:
                proc = subprocess.run([sys.executable, "-c", ONE, ref, cand, str(scale)],
                                      capture_output=True, text=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"  {scale:8g} {'':>10s} {'> ' + str(int(args.timeout)):>9s}")
                continue
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
                print(f"  {scale:8g}  failed (exit {proc.returncode}): {tail}")
                continue
            r = json.loads(lines[-1])
            print(f"  {scale:8g} {r['elements']:10d} {r['seconds']:9.2f} {r['checker_mib']:12.0f} "
                  f"{r['worker_mib']:11.0f}  {r['verdict']}"
                  + (f" ({', '.join(r['failing'])})" if r["failing"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
