"""The Freivalds overhead figures on an accelerator, in one run.

Runs ``bench_freivalds_overhead.py --device cuda`` (square n = 1024 .. 8192 and the
skinny decode shapes, float32 and bfloat16, torch on the device) and
``bench_freivalds_model.py --device cuda`` (the guard on a small transformer's
forward pass, with fault injection, written with nn.Linear and matmul and as GPT-2
writes it), printing the tables and writing their
JSON next to each other.  It exits with status 2 when torch sees no CUDA device.

    python benchmarks/gpu_freivalds.py --out out/gpu_freivalds
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join("out", "gpu_freivalds"))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="n <= 4096, fewer shapes")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device visible to torch: nothing measured", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    import bench_freivalds_model
    import bench_freivalds_overhead

    sizes = ["1024", "2048", "4096"] + ([] if args.quick else ["8192"])
    t0 = time.time()
    bench_freivalds_overhead.main(
        ["--device", "cuda", "--backends", "torch", "--reps", str(args.reps),
         "--sizes", *sizes, "--json", os.path.join(args.out, "overhead.json")]
        + (["--skinny-kn", "4096x4096"] if args.quick else []))
    for style in ("linear", "gpt2"):  # (nn.Linear and matmul; Conv1D's addmm and einsum)
        bench_freivalds_model.main(
            ["--device", "cuda", "--reps", str(args.reps), "--batch", "8", "--seq", "256",
             "--style", style, "--json", os.path.join(args.out, f"model_{style}.json")])
    print(f"done in {time.time() - t0:.0f} s; JSON in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
