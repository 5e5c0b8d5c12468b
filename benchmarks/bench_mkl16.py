"""MKL's mixed-precision GEMM (bfloat16 x bfloat16 -> float32) against the memory floor,
for the few columns the Freivalds check multiplies by.

The check's bfloat16 passes are MKL's ``cblas_gemm_bf16bf16f32`` with one column (the
+-1 signs, exact in bfloat16) or three (a float32 vector as three exact bfloat16 parts).
The floor streams the matrix's own bytes through a float32 gemv (the bfloat16 matrix read
as a float32 matrix of half the width).  Each timing follows a float32 product of the same
size, as in bench_freivalds_overhead.py; medians of the repetitions, side by side.

    python benchmarks/bench_mkl16.py [--sizes 1024 2048 4096] [--reps 9]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from kcontract.freivalds import _mkl


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args(argv)
    if not _mkl.available(_mkl._BF16):
        raise SystemExit("MKL's mixed-precision GEMM is not available here")
    print(f"torch {torch.__version__} (threads: {torch.get_num_threads()}); medians of "
          f"{args.reps}, each after a float32 product; microseconds")
    print(f"{'n':>6} {'floor':>9} {'1 col':>9} {'2 cols':>9} {'3 cols':>9} {'3 / 1':>7} "
          f"{'2 / 1':>7}")
    rng = np.random.default_rng(0)
    for n in args.sizes:
        X = torch.randn(n, n).bfloat16()
        Xh = X.view(torch.int16).numpy().view(_mkl._BF16)
        A = torch.randn(n, n)
        v = rng.standard_normal(n).astype(np.float32)
        half, ones = X.view(torch.float32), torch.ones(n // 2)
        V = _mkl.columns(v, _mkl._BF16)
        cases = {"floor": lambda: torch.mv(half, ones),
                 "1": lambda: _mkl.matvec(Xh, v, cols=(V[0][:, :1], 1.0)),
                 "2": lambda: _mkl.matvec(Xh, v, cols=(np.ascontiguousarray(V[0][:, :2]),
                                                       1.0)),
                 "3": lambda: _mkl.matvec(Xh, v, cols=V)}
        t = {k: [] for k in cases}
        for _ in range(args.reps):
            for k, f in cases.items():
                A @ A
                t0 = time.perf_counter()
                f()
                t[k].append(time.perf_counter() - t0)
        m = {k: statistics.median(x) * 1e6 for k, x in t.items()}
        print(f"{n:>6} {m['floor']:>9.0f} {m['1']:>9.0f} {m['2']:>9.0f} {m['3']:>9.0f} "
              f"{m['3'] / m['1']:>7.2f} {m['2'] / m['1']:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
