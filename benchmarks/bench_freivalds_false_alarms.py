"""False alarms of kcontract.freivalds.verify on honest products.

Runs >= 10,000 honest products with default settings and counts the ones that
fail.  The products span n = 64 .. 4096 (M, N drawn in [n/2, n], K = n),
normal, uniform(-1, 1) and all-positive uniform(0, 1) inputs, five precision
recipes (float32; bfloat16 and float16 operands with float32 accumulation,
output in float32 or in the operand format) and several summation orders and
blockings of the same product:

  blas        numpy / OpenBLAS sgemm           torch      torch / MKL sgemm
  exact       float64 product rounded once     kblock-b   K split in blocks of b
  kreverse    K blocks summed in reverse         splitk-s   s K-slices added pairwise
  permuted    K permuted before the product    sequential rank-1 updates (n <= 256)

The count must be 0.  Also printed: how many products the screen passed to
the float64 element test and, to show the element bound holds empirically,
the largest ratio |C_ij - C*_ij| / bound_ij over two random rows of every
product (recomputed in float64 whether or not the screen picked them).

    python benchmarks/bench_freivalds_false_alarms.py           # 10,080 products
    python benchmarks/bench_freivalds_false_alarms.py --quick   # 1,008 products, n <= 1024
"""
from __future__ import annotations

import argparse
import collections
import os
import time

import ml_dtypes
import numpy as np

from kcontract.freivalds import _model as model
from kcontract.freivalds import verify
from kcontract.freivalds._core import _element_errors, _problem, _units

BF16 = ml_dtypes.bfloat16
#: (n, number of products) for the full run: 10,080 products.
SCHEDULE = [(64, 3000), (128, 2500), (256, 2000), (512, 1500), (1024, 700), (2048, 300),
            (4096, 80)]
QUICK = [(64, 300), (128, 250), (256, 200), (512, 150), (1024, 108)]
DISTS = ("normal", "uniform", "positive")
RECIPES = (  # (operand dtype, output dtype)
    ("float32", "float32"), ("bfloat16", "float32"), ("bfloat16", "bfloat16"),
    ("float16", "float32"), ("float16", "float16"))
DT = {"float32": np.float32, "bfloat16": BF16, "float16": np.float16}


def operands(rng, M, K, N, dist, dtype):
    if dist == "normal":
        a, b = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    elif dist == "uniform":
        a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    else:
        a = rng.uniform(0, 1, (M, K)).astype(np.float32)
        b = rng.uniform(0, 1, (K, N)).astype(np.float32)
    return a.astype(dtype), b.astype(dtype)


def product(order, a, b, rng, torch):
    """float32 product of float32 copies a, b in the given order (float32 result)."""
    K = a.shape[1]
    if order == "blas":
        return a @ b
    if order == "torch":
        return (torch.from_numpy(a) @ torch.from_numpy(b)).numpy()
    if order == "exact":
        return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    if order.startswith("kblock") or order.startswith("kreverse"):
        bs = int(order.split("-")[1])
        starts = list(range(0, K, bs))
        if order.startswith("kreverse"):
            starts = starts[::-1]
        c = np.zeros((a.shape[0], b.shape[1]), np.float32)
        for s in starts:
            c += a[:, s:s + bs] @ b[s:s + bs]
        return c
    if order.startswith("splitk"):
        s = int(order.split("-")[1])
        edges = np.linspace(0, K, s + 1).astype(int)
        parts = [a[:, e0:e1] @ b[e0:e1] for e0, e1 in zip(edges[:-1], edges[1:])]
        while len(parts) > 1:
            parts = [parts[i] + parts[i + 1] if i + 1 < len(parts) else parts[i]
                     for i in range(0, len(parts), 2)]
        return parts[0]
    if order == "permuted":
        p = rng.permutation(K)
        return a[:, p] @ b[p]
    if order == "sequential":
        c = np.zeros((a.shape[0], b.shape[1]), np.float32)
        for k in range(K):
            c += np.multiply.outer(a[:, k], b[k])
        return c
    raise ValueError(order)


def element_ratio(a, b, c, rng, rows=2):
    """max |C_ij - C*_ij| / bound_ij over a few random rows (stage 2, forced)."""
    p = _problem(a, b, c, None, None)
    units = _units(p)
    idx = rng.choice(p.M, size=min(rows, p.M), replace=False)
    cstar, abssum = p.ops.exact_rows(a, b, [((), (), int(i)) for i in idx])
    L = model.element_log_term(p.M * p.N, 1e-9 / 2)
    worst = 0.0
    for k, i in enumerate(idx):
        bound = model.element_bounds(cstar[k], abssum[k], p.K, units, L)
        with np.errstate(over="ignore", invalid="ignore"):
            err, bad = _element_errors(np.asarray(c[i], dtype=np.float64), cstar[k], bound, p.out)
        worst = max(worst, float(np.max(np.abs(err) / bound)))
    return worst


def orders_for(n, torch):
    orders = ["blas", "exact", "kblock-64", "kblock-512", "kreverse-128", "splitk-4",
              "splitk-16", "permuted"]
    if torch is not None:
        orders.append("torch")
    if n <= 256:
        orders.append("sequential")
    return orders


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1,008 products, n <= 1024")
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    schedule = QUICK if args.quick else SCHEDULE
    rng = np.random.default_rng(args.seed)
    total = sum(c for _, c in schedule)
    print(f"{total} honest products, default settings (false_alarm=1e-9, rounds=1); "
          f"{os.cpu_count()} CPUs")
    t0 = time.perf_counter()
    count = collections.Counter()
    fails = collections.Counter()
    screened = collections.Counter()
    worst = collections.defaultdict(float)
    examples = []
    k = 0
    for n, num in schedule:
        orders = orders_for(n, torch)
        t_n = time.perf_counter()
        for _ in range(num):
            dist = DISTS[k % len(DISTS)]
            opname, outname = RECIPES[(k // len(DISTS)) % len(RECIPES)]
            order = orders[(k // (len(DISTS) * len(RECIPES))) % len(orders)]
            k += 1
            M, N = (int(rng.integers(n // 2, n + 1)) for _ in range(2))
            a, b = operands(rng, M, n, N, dist, DT[opname])
            c32 = product(order, a.astype(np.float32), b.astype(np.float32), rng, torch)
            c = c32.astype(DT[outname])
            res = verify(a, b, c)
            key = (n, dist, f"{opname}->{outname}", order)
            count[key[1:]] += 1
            count[("n", n)] += 1
            if res.screened_rows:
                screened[("n", n)] += 1
            er = element_ratio(a, b, c, rng)
            for kk in (("n", n), ("recipe", key[2]), ("order", order), ("dist", dist)):
                worst[kk] = max(worst[kk], er)
            if not res.passed:
                fails[("n", n)] += 1
                fails[key[1:]] += 1
                if len(examples) < 10:
                    examples.append((key, res.message, res.ratio))
        print(f"  n={n:5d}: {count[('n', n)]:5d} products, {fails[('n', n)]} false alarms, "
              f"{screened[('n', n)]} screened to the element test; worst |error|/bound "
              f"{worst[('n', n)]:.3g}  ({time.perf_counter() - t_n:.0f} s)", flush=True)
    nfail = sum(v for kk, v in fails.items() if kk[0] == "n")
    print("by input distribution / recipe / order (products/false alarms, worst |error|/bound):")
    for dim, vals in (("dist", DISTS), ("recipe", [f"{o}->{p}" for o, p in RECIPES]),
                      ("order", sorted({kk[2] for kk in count if kk[0] != "n"}))):
        pos = {"dist": 0, "recipe": 1, "order": 2}[dim]
        parts = []
        for v in vals:
            tot = sum(c for kk, c in count.items() if kk[0] != "n" and kk[pos] == v)
            bad = sum(c for kk, c in fails.items() if kk[0] != "n" and kk[pos] == v)
            parts.append(f"{v} {tot}/{bad} ({worst[(dim, v)]:.3g})")
        print(f"  {dim}: " + ", ".join(parts))
    for ex in examples:
        print("  FALSE ALARM:", ex)
    print(f"TOTAL: {k} honest products, {nfail} false alarms "
          f"({time.perf_counter() - t0:.0f} s)")
    return 1 if nfail else 0


if __name__ == "__main__":
    raise SystemExit(main())
