"""Faults spread over several elements, against kcontract.freivalds.verify.

One round with +-1 weights catches any single wrong element; a fault spread over
several elements can cancel out of the residual.  This prints, for honest and
corrupted float32 products (numpy, normal inputs):

  narrow    N = 2 .. 15 (one residual per column): honest products that fail, and
            misses of a whole row offset by 1e-2 max|C| and of two elements of one
            row off by the same amount (+1.0)
  pairs     N = 256: two elements of one row off by +1.0 each, and two output
            columns swapped, with rounds = 1 and rounds = 4 (cancellation about
            1/2 and 1/16)
  column    n = 1024: every element of one column off by e = 1e-4 max|C| (an error
            in every row raises the median-calibrated screen), against one element
            off by the same e

    python benchmarks/bench_freivalds_cancellation.py [--trials 200]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from kcontract.freivalds import verify


def narrow(rng, seeds: int) -> None:
    honest = fa = tried = missed = 0
    for N in range(2, 16):
        for M, K in ((64, 64), (200, 300), (1000, 128), (33, 4000)):
            A = rng.standard_normal((M, K), dtype=np.float32)
            B = rng.standard_normal((K, N), dtype=np.float32)
            C = A @ B
            offset, pair = C.copy(), C.copy()
            offset[3] += np.float32(1e-2 * np.abs(C).max())
            pair[5, :2] += np.float32(1.0)
            for seed in range(seeds):
                honest += 1
                fa += not verify(A, B, C, seed=seed).passed
                for bad in (offset, pair):
                    tried += 1
                    missed += verify(A, B, bad, seed=seed).passed
    print(f"narrow (N = 2..15, groups = N): {honest} honest products, {fa} failed; "
          f"{tried} row offsets / equal pairs, {missed} passed")


def pairs(rng, trials: int) -> None:
    M, K, N = 256, 256, 256
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    C = A @ B
    two = C.copy()
    two[9, [3, 70]] += np.float32(1.0)
    swap = C.copy()
    swap[:, [3, 70]] = C[:, [70, 3]]
    for rounds in (1, 4):
        passed = [sum(verify(A, B, bad, seed=s, rounds=rounds).passed for s in range(trials))
                  for bad in (two, swap)]
        print(f"pairs (N = {N}, rounds = {rounds}): two equal errors in a row passed "
              f"{passed[0]} of {trials}; two swapped columns passed {passed[1]} of {trials}")


def column(rng, trials: int) -> None:
    n = 1024
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    C = A @ B
    e = np.float32(1e-4 * np.abs(C).max())
    col, one = C.copy(), C.copy()
    col[:, 17] += e
    one[100, 17] += e
    passed = [sum(verify(A, B, bad, seed=s).passed for s in range(trials)) for bad in (col, one)]
    print(f"column (n = {n}, e = 1e-4 max|C|): every element of a column off by e passed "
          f"{passed[0]} of {trials}; one element off by e passed {passed[1]} of {trials}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200, help="seeds per corrupted product")
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    t0 = time.time()
    narrow(rng, 5)
    pairs(rng, args.trials)
    column(rng, max(10, args.trials // 10))
    print(f"({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
