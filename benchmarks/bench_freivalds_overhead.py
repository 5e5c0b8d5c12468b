"""Overhead of kcontract.freivalds.verify against its memory floor, per shape.

The check reads each matrix once; the least any such check can cost is the
"floor": the bare matrix-vector products it is made of, on the same backend and
in the operands' own dtype (B r, A (B r) and C r with a +-1 vector r for square
products; for the skinny decode-time products of a linear layer, whose weight
projection W^T r the guard caches, only x (W^T r) and C r).  Each repetition
times a product, then the check; then another product and the floor -- both
right after a product, in alternating order -- so that both start with the
caches in the same state (at least --reps repetitions, more for short products: about
half a second of them, at most 61).  The figures are medians over the repetitions and
the ratio verify / floor is the goal (at most 1.2); the ratio of the two
smallest times is printed beside it (on a shared machine it shows what an
undisturbed repetition costs).  The load average is printed before and after:
a busy machine inflates every figure, the fixed Python cost of a call most.

First it prints the cold start after a product of each size (--no-cold to skip): the time
of the first Python statements that follow it, which the product evicted from the caches
-- what every step a check takes first from Python costs there, and why the small
products' checks stay above the goal while the floor (a few calls into the BLAS) does not
pay it.

Rows:
  minimal  a reference, not a check: the floor plus the least any check driven from
           Python must add (fresh signs, one pass over the residual, a result object;
           for skinny shapes the two products with the cached projection, the residual
           and a result); its ratio is the part of the fixed cost no Python-level change
           can remove;
  square   n x n x n, numpy and torch, float32 and bfloat16 (bfloat16: the
           operands and C in bfloat16, float32 accumulation; the floor streams
           the operands' own bytes, each bfloat16 matrix read as a float32 matrix
           of half the width through a float32 gemv -- a view of the same memory);
  skinny   M x K times K x N with M = 1 .. 128 (decode), through the guard's
           weight cache (torch), float32 and bfloat16: Guard.check_linear right after
           each product;
  decode   the same shapes as a decode step, L*MxKxN: L products (distinct weights;
           --decode-layers, fewer where the weights would pass 2 GiB), each recorded by a
           deferring guard (defer=True) right after it and checked in its flush at the end
           of the step (a product of more than 128 KiB of input and output is
           checked at once, as a deferring guard does: DEFER_PRODUCT_BYTES); per product
           (records + flush) / L against the mean floor of the same products (the
           flush's first check runs from cold caches, the others much faster: more
           layers per step amortise it); twice --reps repetitions at least, a
           step's figure varying more between repetitions than a single check's;
  attn     attention's batched q k^T (batch x heads matrices of T x D times D x T,
           float32) with the strided layouts of a fused q/k/v projection, numpy and
           torch; the floor is the three batched matrix-vector products.

    python benchmarks/bench_freivalds_overhead.py              # the default shapes
    python benchmarks/bench_freivalds_overhead.py --quick      # fewer shapes and repetitions
    python benchmarks/bench_freivalds_overhead.py --device cuda  # on an accelerator
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

from kcontract.freivalds import FreivaldsResult, verify
from kcontract.freivalds._guard import Guard
from kcontract.freivalds._screen import signs

GOAL = 1.2
#: the decode rows' distinct weights take at most this much memory
DECODE_BYTES = 2 << 30


def openblas_threads() -> str:
    """Threads of numpy's OpenBLAS (threadpoolctl), if found."""
    from threadpoolctl import threadpool_info

    return next((str(i["num_threads"]) for i in threadpool_info()
                 if i.get("internal_api") == "openblas"), "unknown")


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def summary(t_mm, t_v, t_f, after) -> dict:
    """The figures of a measurement: medians (and minima) of the product, check and floor
    times, their ratio, and the products' times after checks and after floors."""
    med = statistics.median
    return {"matmul_s": med(t_mm), "verify_s": med(t_v), "floor_s": med(t_f),
            "ratio": med(t_v) / med(t_f), "ratio_min": min(t_v) / min(t_f),
            "verify_min_s": min(t_v), "floor_min_s": min(t_f),
            "matmul_after_verify_s": med(after[0]), "matmul_after_floor_s": med(after[1]),
            "interference": med(after[0]) / med(after[1]), "reps": len(t_v)}


#: repetitions of a row whose product is short: as many as take about this many seconds of
#: products (two a repetition), at most MAX_REPS -- a median of 9 timings of a 30 us check
#: moves by 0.2-0.3 between runs on a shared machine
MIN_SECONDS, MAX_REPS = 0.5, 61


def reps_for(seconds_per_product: float, reps: int) -> int:
    """The repetitions of a row: at least ``reps``, more (up to MAX_REPS) where its
    products are short; the same number of checks and floors either way."""
    more = int(MIN_SECONDS / max(2 * seconds_per_product, 1e-9))
    return max(reps, min(MAX_REPS, more | 1))


def measure(matmul, check, floor, reps: int, sync=lambda: None) -> dict:
    """Interleaved timings: (product, check) and (product, floor) pairs in
    alternating order, each timed right after its product; ``reps`` of them, more where
    the product is short (:func:`reps_for`)."""
    # the least of the products' times in about 0.2 s (at most 10): a row's first products
    # pay first touches and set-up, and a torch row's right after a numpy one share the
    # cores with OpenBLAS's threads still spinning (torch float32 512^3: 15 ms each for
    # three products, 1.6 ms after) -- with the first's time such rows got 11 to 17
    # repetitions instead of 61
    took = []
    while len(took) < 10 and sum(took) < 0.2:
        t0 = time.perf_counter()
        C = matmul()
        sync()
        took.append(time.perf_counter() - t0)
    reps = reps_for(min(took), reps)
    assert check(C), "honest product failed"
    floor(C)
    t_mm, t_v, t_f = [], [], []
    after = {0: [], 1: []}  # product times after a check (0) and after a floor (1)
    last = None

    def timed(f, C):
        t0 = time.perf_counter()
        out = f(C)
        sync()
        return time.perf_counter() - t0, out

    for rep in range(reps):
        for which in ((0, 1) if rep % 2 == 0 else (1, 0)):
            t0 = time.perf_counter()
            C = matmul()
            sync()
            t_mm.append(time.perf_counter() - t0)
            if last is not None:
                after[last].append(t_mm[-1])
            last = which
            if which == 0:
                dt, res = timed(check, C)
                assert res, "honest product failed"
                t_v.append(dt)
            else:
                dt, _ = timed(floor, C)
                t_f.append(dt)
            del C
    return summary(t_mm, t_v, t_f, after)


def square_cases(n: int, dtype: str, backends, torch, device):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    r32 = np.where(rng.random(n) < 0.5, -1.0, 1.0).astype(np.float32)
    out = []
    if "numpy" in backends and device == "cpu":
        if dtype == "float32":
            out.append(("numpy", lambda: A @ B, lambda C: verify(A, B, C),
                        lambda C: (A @ (B @ r32), C @ r32)))
        else:
            import ml_dtypes

            bf = ml_dtypes.bfloat16
            Ab, Bb = A.astype(bf), B.astype(bf)
            A32, B32 = Ab.astype(np.float32), Bb.astype(np.float32)  # the product's inputs
            # numpy has no bfloat16 gemv: the floor streams the operands' own bytes,
            # read as float32 matrices of half the width (a view, no copy: the same
            # memory in the same cache state as the check reads)
            rh = r32[: n // 2]
            out.append(("numpy", lambda: (A32 @ B32).astype(bf), lambda C: verify(Ab, Bb, C),
                        lambda C: (Ab.view(np.float32) @ rh, Bb.view(np.float32) @ rh,
                                   C.view(np.float32) @ rh)))
    if "torch" in backends and torch is not None:
        tdt = getattr(torch, dtype)
        At = torch.from_numpy(A).to(device=device, dtype=tdt)
        Bt = torch.from_numpy(B).to(device=device, dtype=tdt)
        rt = torch.from_numpy(r32).to(device=device, dtype=tdt)
        if dtype == "float32" or device != "cpu":
            out.append(("torch", lambda: At @ Bt, lambda C: verify(At, Bt, C),
                        lambda C: (torch.mv(At, torch.mv(Bt, rt)), torch.mv(C, rt))))
        else:
            out.append(("torch", *cpu_narrow(torch, At, Bt, (At, Bt))))
    return out


def minimal_case(n: int):
    """The least a check driven from Python adds to the floor, measured the same way:
    fresh random signs, the three products, one pass over the residual and a result
    object -- no row scales, no calibration, no decision (numpy, float32)."""
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    r32 = np.where(rng.random(n) < 0.5, -1.0, 1.0).astype(np.float32)

    def minimal(C):
        r = signs(int.from_bytes(os.urandom(8), "little") >> 1, 0, n, np.float32)
        d = np.abs(A @ (B @ r) - C @ r)
        return FreivaldsResult(passed=True, reason="verified", suspect_rows=[], suspects=[],
                               threshold=np.asarray(0.0), ratio=float(d.max()),
                               false_alarm=1e-9, screen_ratio=0.0)
    return lambda: A @ B, minimal, lambda C: (A @ (B @ r32), C @ r32)


def skinny_minimal(torch, M: int, K: int, N: int):
    """The skinny rows' reference (as minimal_case): the two products with the cached
    projection, one pass over the residual and a result object, entered from Python."""
    g = torch.Generator().manual_seed(M * 7 + K + N)
    W = torch.randn(N, K, generator=g) / K ** 0.5
    x = torch.randn(M, K, generator=g)
    r = torch.from_numpy(signs(1, 0, N, np.float32))
    y = W.T @ r

    def minimal(C):
        d = (torch.mv(x, y) - torch.mv(C, r)).abs_()
        return FreivaldsResult(passed=True, reason="verified", suspect_rows=[], suspects=[],
                               threshold=np.asarray(0.0), ratio=float(d.max()),
                               false_alarm=1e-9, screen_ratio=0.0)
    F = torch.nn.functional
    return lambda: F.linear(x, W), minimal, lambda C: (torch.mv(x, y), torch.mv(C, r))


def cpu_narrow(torch, x, w, mats):
    """Product and floor for 16-bit operands on a CPU.  The product is computed in
    float32 from the same values and rounded (torch's bfloat16 matmul is far from
    float32's speed on CPUs without native bfloat16 arithmetic); the floor streams
    the operands' and the output's own bytes through float32 gemvs, each 16-bit
    matrix read as a float32 matrix of half the width (a view of the same memory,
    in the same cache state as the check reads it)."""
    x32, w32 = x.float(), w.float()
    tdt = x.dtype

    def check(C):
        return verify(x, w, C)
    return (lambda: (x32 @ w32).to(tdt), check,
            lambda C: [torch.mv(half_view(torch, m), ones_for(torch, m))
                       for m in (*mats, C)])


_ONES: dict = {}


def ones_for(torch, m):
    n = m.shape[-1] // 2
    v = _ONES.get(n)
    if v is None:
        v = _ONES[n] = torch.ones(n)
    return v


def half_view(torch, m):
    """A contiguous 16-bit matrix's bytes as a float32 matrix of half the width."""
    return m.view(torch.float32)


def skinny_case(torch, M: int, K: int, N: int, dtype: str, device, seed: int = 0):
    """A linear layer's product x W^T with the guard's cached W^T r."""
    tdt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(M * 7 + K + N + 1000003 * seed)
    W = torch.nn.Parameter((torch.randn(N, K, generator=g) / K ** 0.5).to(device=device,
                                                                          dtype=tdt),
                           requires_grad=False)
    x = torch.randn(M, K, generator=g).to(device=device, dtype=tdt)
    F = torch.nn.functional
    guard = Guard(seed=1)  # (on_fail="raise": a failed check raises)

    def check(C):  # what the guard runs for each F.linear call it intercepts
        guard.check_linear(x, W, C)  # (the benchmark's own reads of the guard's counters,
        return True  # two cold attribute chains, stay out of the timed call)
    narrow_cpu = dtype != "float32" and device == "cpu"
    W32 = W.float() if narrow_cpu else None
    def matmul():
        return F.linear(x.float(), W32).to(tdt) if narrow_cpu else F.linear(x, W)
    matmul.x, matmul.W = x, W
    check(matmul())  # fills the cache: W^T r is computed once
    proj = next(iter(guard._cache.entries.values()))[2]
    if narrow_cpu:  # x's and C's own bytes streamed as float32 (see cpu_narrow)
        yh, rh = torch.ones(K // 2), torch.ones(N // 2)
        return matmul, check, lambda C: (torch.mv(half_view(torch, x), yh),
                                         torch.mv(half_view(torch, C), rh))
    y = proj.y.to(tdt)
    r = proj.rd.to(tdt)
    return matmul, check, lambda C: (torch.mv(x, y), torch.mv(C, r))


def decode_step(torch, M: int, K: int, N: int, dtype: str, device, layers: int):
    """``layers`` linear layers of one shape (distinct weights and inputs), as in one
    decode step, with one deferring guard (``defer=True``) whose weight cache is filled:
    [(product, its record in the guard, its floor)] and the guard."""
    guard = Guard(seed=1, defer=True)
    steps = []
    for i in range(layers):
        mm, _, fl = skinny_case(torch, M, K, N, dtype, device, seed=i)
        x, W = mm.x, mm.W
        steps.append((mm, lambda C, x=x, W=W: guard.check_linear(x, W, C), fl))
    for mm, rec, _ in steps:  # fills the cache
        rec(mm())
    guard.flush()
    assert guard.stats.failed == 0, "honest product failed"
    return steps, guard


def measure_step(steps, guard, reps: int, sync=lambda: None) -> dict:
    """A decode step's products, each followed by its (deferred) check, and the guard's
    flush at the end -- against the same products each followed by its floor, in
    alternating order.  Figures per product: (records + flush) / layers against the mean
    floor; the products' own times after checks and after floors."""
    L = len(steps)
    t0 = time.perf_counter()
    steps[0][0]()
    sync()
    reps = reps_for(L * (time.perf_counter() - t0), reps)
    t_mm, t_v, t_f = [], [], []
    after = {0: [], 1: []}
    for rep in range(reps):
        for which in ((0, 1) if rep % 2 == 0 else (1, 0)):
            total = 0.0
            for mm, rec, fl in steps:
                t0 = time.perf_counter()
                C = mm()
                sync()
                t_mm.append(time.perf_counter() - t0)
                after[which].append(t_mm[-1])
                t0 = time.perf_counter()
                (rec if which == 0 else fl)(C)
                sync()
                total += time.perf_counter() - t0
                del C
            if which == 0:
                failed = guard.stats.failed
                t0 = time.perf_counter()
                guard.flush()
                sync()
                total += time.perf_counter() - t0
                assert guard.stats.failed == failed, "honest product failed"
                t_v.append(total / L)
            else:
                t_f.append(total / L)
    return summary(t_mm, t_v, t_f, after)


def attention_cases(B: int, H: int, T: int, D: int, backends, torch, device):
    """The batched product q k^T of attention (float32), with the layouts a fused q/k/v
    projection gives: q and k are (B, H, T, D) views of one (B, T, 3 H D) array, k^T a
    transposed view.  The floor: the batched matrix-vector products the check makes,
    y = k^T r, q y and (q k^T) r, through the library's own batched product."""
    rng = np.random.default_rng(T)
    qkv = rng.standard_normal((B, T, 3 * H * D), dtype=np.float32)
    q, k = (qkv[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D).transpose(0, 2, 1, 3)
            for i in range(2))
    kt = k.swapaxes(-1, -2)
    r = np.where(rng.random(T) < 0.5, -1.0, 1.0).astype(np.float32)
    out = []
    if "numpy" in backends and device == "cpu":
        out.append(("numpy", lambda: np.matmul(q, kt), lambda C: verify(q, kt, C),
                    lambda C: (np.matmul(q, np.matmul(kt, r)[..., None]), np.matmul(C, r))))
    if "torch" in backends and torch is not None:
        qt = torch.from_numpy(qkv).to(device)
        qs, ks = (qt[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D).transpose(1, 2)
                  for i in range(2))
        kts = ks.transpose(-2, -1)
        rt = torch.from_numpy(r).to(device)
        out.append(("torch", lambda: torch.matmul(qs, kts), lambda C: verify(qs, kts, C),
                    lambda C: (torch.matmul(qs, torch.matmul(kts, rt).unsqueeze(-1)),
                               torch.matmul(C, rt))))
    return out


def cold_start(sizes, reps: int, torch=None) -> list:
    """What the first steps of any Python-entered call cost right after a product: the
    product streams its operands through the caches and evicts the interpreter's own code
    and objects, so the first statements run from memory.  Per n and library (a numpy and,
    with torch, a torch float32 product of n^3), medians over ``reps`` products of the time
    of one dictionary store (the first statement after the product, then the same
    statement again) and of a call to a small Python function (first and second time)."""
    def small(x):
        return x + 1

    out = []
    for n in sizes:
        rng = np.random.default_rng(n)
        A = rng.standard_normal((n, n), dtype=np.float32)
        B = rng.standard_normal((n, n), dtype=np.float32)
        prods = [("numpy", lambda: A @ B)]
        if torch is not None:
            At, Bt = torch.from_numpy(A), torch.from_numpy(B)
            prods.append(("torch", lambda: At @ Bt))
        for lib, mm in prods:
            d: dict = {}
            t = [[], [], [], []]
            for _ in range(reps):
                C = mm()
                t0 = time.perf_counter()
                d[0] = 1
                t1 = time.perf_counter()
                d[1] = 2
                t2 = time.perf_counter()
                small(1)
                t3 = time.perf_counter()
                small(2)
                t4 = time.perf_counter()
                for i, dt in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                    t[i].append(dt)
                del C
            out.append({"n": n, "lib": lib, **{k: statistics.median(v) for k, v in
                                               zip(("store_first_s", "store_again_s",
                                                    "call_first_s", "call_again_s"), t)}})
    return out


def fmt_row(kind, shape, backend, dtype, m) -> str:
    flag = "ok" if m["ratio"] <= GOAL else "over"
    return (f"{kind:>7} {shape:>16} {backend:>6} {dtype:>9} {m['matmul_s'] * 1e3:>10.3f} "
            f"{m['verify_s'] * 1e3:>10.3f} {m['floor_s'] * 1e3:>10.3f} {m['ratio']:>7.2f} "
            f"{m['ratio_min']:>7.2f} {m['verify_s'] / m['matmul_s']:>8.2%} "
            f"{m['floor_s'] / m['matmul_s']:>8.2%} {m['interference']:>6.2f} {flag:>5}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[512, 1024, 2048, 4096])
    ap.add_argument("--skinny-m", type=int, nargs="*", default=[1, 16, 128])
    ap.add_argument("--skinny-kn", nargs="*", default=["4096x4096", "4096x14336", "14336x4096"],
                    help="K x N of the skinny products (none: no skinny rows)")
    ap.add_argument("--attention", nargs="*", default=["4x6x128x64", "2x16x512x64"],
                    help="batch x heads x tokens x head size of the batched q k^T products")
    ap.add_argument("--decode-layers", type=int, default=16,
                    help="layers of the 'decode' rows (0: none): a step's products of one "
                         "skinny shape, checked by a deferring guard (fewer where their "
                         "distinct weights would take more than 2 GiB)")
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--backends", nargs="+", default=["numpy", "torch"])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--quick", action="store_true",
                    help="n = 512 .. 2048, skinny K = N = 4096, 5 repetitions")
    ap.add_argument("--device", default="cpu", help="torch device (cpu, cuda, ...)")
    ap.add_argument("--numpy-mkl-threads", action="store_true",
                    help="let MKL's bfloat16 product use its own threads for numpy arrays too "
                         "(by default it runs on the calling thread beside numpy's BLAS "
                         "threads): shows why")
    ap.add_argument("--no-bound", dest="bound", action="store_false",
                    help="skip the 'minimal' rows (what any check driven from Python adds "
                         "to the floor: signs, one pass over the residual, a result)")
    ap.add_argument("--no-cold", dest="cold", action="store_false",
                    help="skip the cold-start figures (the first Python statements after a "
                         "product)")
    ap.add_argument("--json", help="write the measurements to this file")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.skinny_kn, args.reps = [s for s in args.sizes if s <= 2048], \
            ["4096x4096"], min(args.reps, 5)
    try:
        import torch
    except ImportError:
        torch = None
    if args.numpy_mkl_threads:  # as where MKL has no per-thread setting: its threads run
        from kcontract.freivalds import _mkl
        _mkl._load()
        _mkl._SET_THREADS = None
    if args.device != "cpu" and torch is None:
        raise SystemExit("--device needs torch")
    sync = (lambda: torch.cuda.synchronize()) if args.device.startswith("cuda") else \
        (lambda: None)
    dev_name = (torch.cuda.get_device_name() if args.device.startswith("cuda") else
                platform.processor() or platform.machine())
    print(f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs, device {args.device} "
          f"({dev_name}); numpy {np.__version__} (OpenBLAS threads: {openblas_threads()})"
          + (f"; torch {torch.__version__} (threads: {torch.get_num_threads()})" if torch else ""))
    print(f"load average: {load_average()}")
    print(f"median of {args.reps} interleaved repetitions (more, up to {MAX_REPS}, where a "
          f"row's products take less than {MIN_SECONDS} s); ratio = verify / floor "
          f"(goal <= {GOAL}), (min) = smallest verify / smallest floor; % of the product; "
          "next = the next product's time after a check / after a floor (a check that "
          "leaves threads spinning slows the product that follows it)")
    if args.cold:
        cold = cold_start(args.sizes, max(args.reps, 9),
                          torch if args.device == "cpu" else None)
        print("cold start (a float32 product of n^3, then the first Python statements; "
              "a check entered from Python pays this for every step it takes first):")
        for c in cold:
            print(f"  n = {c['n']:>5} {c['lib']:>5}: a dict store {c['store_first_s'] * 1e6:6.1f} us "
                  f"(again {c['store_again_s'] * 1e6:4.1f}), a small function's call "
                  f"{c['call_first_s'] * 1e6:6.1f} us (again {c['call_again_s'] * 1e6:4.1f})")
    else:
        cold = []
    hdr = (f"{'kind':>7} {'M x K x N':>16} {'lib':>6} {'dtype':>9} {'matmul ms':>10} "
           f"{'verify ms':>10} {'floor ms':>10} {'ratio':>7} {'(min)':>7} {'verify%':>8} "
           f"{'floor%':>8} {'next':>6} {'goal':>5}")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for n in args.sizes:
        for dtype in args.dtypes:
            for backend, mm, chk, fl in square_cases(n, dtype, args.backends, torch, args.device):
                m = measure(mm, chk, fl, args.reps, sync)
                print(fmt_row("square", f"{n}^3", backend, dtype, m), flush=True)
                rows.append({"kind": "square", "M": n, "K": n, "N": n, "backend": backend,
                             "dtype": dtype, **m})
    for shape in args.attention:
        B, H, T, D = (int(v) for v in shape.lower().split("x"))
        for backend, mm, chk, fl in attention_cases(B, H, T, D, args.backends, torch,
                                                    args.device):
            m = measure(mm, chk, fl, args.reps, sync)
            print(fmt_row("attn", f"{B * H}x{T}x{D}x{T}", backend, "float32", m), flush=True)
            rows.append({"kind": "attention", "batch": B * H, "M": T, "K": D, "N": T,
                         "backend": backend, "dtype": "float32", **m})
    if args.bound and "numpy" in args.backends and args.device == "cpu":
        for n in args.sizes:
            m = measure(*minimal_case(n), args.reps)
            print(fmt_row("minimal", f"{n}^3", "numpy", "float32", m), flush=True)
            rows.append({"kind": "minimal", "M": n, "K": n, "N": n, "backend": "numpy",
                         "dtype": "float32", **m})
    if torch is not None and "torch" in args.backends:
        with torch.no_grad():
            for kn in args.skinny_kn:
                K, N = (int(v) for v in kn.lower().split("x"))
                for dtype in args.dtypes:
                    for M in args.skinny_m:
                        mm, chk, fl = skinny_case(torch, M, K, N, dtype, args.device)
                        m = measure(mm, chk, fl, args.reps, sync)
                        print(fmt_row("skinny", f"{M}x{K}x{N}", "torch", dtype, m), flush=True)
                        rows.append({"kind": "skinny", "M": M, "K": K, "N": N,
                                     "backend": "torch", "dtype": dtype, **m})
                        if args.decode_layers:
                            # distinct weights (and, for bfloat16 on a CPU, their float32
                            # copies for the product) within DECODE_BYTES
                            per = K * N * (4 if dtype == "float32" else 6)
                            L = max(2, min(args.decode_layers, DECODE_BYTES // per))
                            steps, g = decode_step(torch, M, K, N, dtype, args.device, L)
                            # twice the repetitions: a step's figure (L records and a
                            # flush) moves more from one repetition to the next than a
                            # single check's (16 x 14336 x 4096 bfloat16, 15 repetitions
                            # a measurement: 0.88-1.19 of the floor across nine of them,
                            # its single check 0.94-0.98)
                            m = measure_step(steps, g, 2 * args.reps, sync)
                            print(fmt_row("decode", f"{L}*{M}x{K}x{N}", "torch", dtype, m),
                                  flush=True)
                            rows.append({"kind": "decode", "M": M, "K": K, "N": N,
                                         "layers": L, "backend": "torch",
                                         "dtype": dtype, **m})
                            del steps, g
                        if args.bound and dtype == "float32" and args.device == "cpu":
                            mm, mn, fl = skinny_minimal(torch, M, K, N)
                            m = measure(mm, mn, fl, args.reps, sync)
                            print(fmt_row("minimal", f"{M}x{K}x{N}", "torch", dtype, m),
                                  flush=True)
                            rows.append({"kind": "minimal", "M": M, "K": K, "N": N,
                                         "backend": "torch", "dtype": dtype, **m})
    checks = [r for r in rows if r["kind"] != "minimal"]
    worst = max((r["ratio"] for r in checks), default=float("nan"))
    print(f"worst ratio {worst:.2f} (goal {GOAL}); "
          f"{sum(r['ratio'] <= GOAL for r in checks)} of {len(checks)} rows within the goal "
          "(the 'minimal' rows are a reference, not a check)")
    print(f"load average: {load_average()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load_average": load_average(), "cold_start": cold, "rows": rows},
                      fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
