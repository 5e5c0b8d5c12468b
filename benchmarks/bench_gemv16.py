"""The bfloat16 matrix-vector product with a float32 vector and float32 result, against
the memory floor: the compiled helper's kernel (``_fastc.gemv16``, each instruction set
the CPU has) beside MKL's mixed-precision GEMM with the vector as three exact bfloat16
columns (what the check used before the kernel, where torch's MKL is there).

The floor streams the matrix's own bytes through a float32 gemv (the bfloat16 matrix read
as a float32 matrix of half the width), on torch's threads (``torch.mv``) and on numpy's
(OpenBLAS).  Each timing follows a float32 product of the same size, as in
bench_freivalds_overhead.py; medians of the repetitions, side by side; microseconds.

--starts: instead, each kernel and the numpy floor on one thread, hot (the best of
--reps x 20 calls), with the matrix starting 0, 16, 32 and 48 bytes into a cache line (a
numpy array from malloc starts on any 16-byte boundary): what a row's start within a
line costs each of them.

    python benchmarks/bench_gemv16.py [--sizes 1024 2048 4096] [--reps 9] [--starts]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from kcontract.freivalds import _mkl

try:
    from kcontract.freivalds import _fastc
except ImportError:  # pragma: no cover - the helper could not be built
    _fastc = None

ISA = {0: "C", 1: "AVX2", 2: "AVX-512"}
STARTS = (0, 16, 32, 48)


def at_start(bits: np.ndarray, start: int) -> np.ndarray:
    """A copy of the uint16 matrix ``bits`` starting ``start`` bytes into a cache line."""
    buf = np.empty(bits.nbytes + 128, np.uint8)
    at = (-buf.ctypes.data) % 64 + start
    out = buf[at: at + bits.nbytes].view(np.uint16).reshape(bits.shape)
    out[:] = bits
    return out


def starts(sizes, reps: int, isas) -> None:
    """The --starts table: one thread, hot, best of reps x 20 calls, microseconds."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(1)
    print(f"one thread, hot, best of {reps * 20} calls; microseconds; "
          "start: bytes into a cache line")
    cols = ["numpy floor"] + [f"gemv16 {ISA[i]}" for i in isas]
    print(f"{'n':>6} {'start':>5} " + " ".join(f"{c:>14}" for c in cols))
    with threadpool_limits(1):
        for n in sizes:
            base = (rng.standard_normal((n, n), dtype=np.float32).view(np.uint32)
                    >> 16).astype(np.uint16)
            v, ones = np.ones(n, np.float32), np.ones(n // 2, np.float32)
            out = np.empty(n, np.float32)
            for start in STARTS:
                bits = at_start(base, start)
                half = bits.view(np.float32)
                cases = [lambda: half @ ones] + [
                    (lambda i=i: _fastc.gemv16(bits, v, out, i, 0, 0)) for i in isas]
                best = []
                for f in cases:
                    f()
                    ts = []
                    for _ in range(reps * 20):
                        t0 = time.perf_counter()
                        f()
                        ts.append(time.perf_counter() - t0)
                    best.append(min(ts) * 1e6)
                print(f"{n:>6} {start:>5} " + " ".join(f"{b:>14.1f}" for b in best))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--starts", action="store_true",
                    help="time each kernel hot at each start within a cache line instead")
    args = ap.parse_args(argv)
    if _fastc is None:
        raise SystemExit("the compiled helper (kcontract.freivalds._fastc) is not built here")
    try:
        import torch
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    probe = np.empty(1, np.float32)
    cpu = _fastc.gemv16(np.zeros((1, 2), np.uint16), np.zeros(2, np.float32), probe)
    isas = list(range(cpu + 1))
    if args.starts:
        starts(args.sizes, args.reps, isas)
        return 0
    mkl = _mkl.available(_mkl._BF16)
    cols = ["numpy floor"] + (["torch floor"] if torch is not None else []) + \
        [f"gemv16 {ISA[i]}" for i in isas] + (["MKL 3 cols"] if mkl else [])
    print(f"medians of {args.reps}, each after a float32 product; microseconds; "
          f"the CPU's instruction set for the kernel: {ISA[cpu]}"
          + ("" if mkl else "; MKL's bfloat16 GEMM not found (no torch)"))
    print(f"{'n':>6} " + " ".join(f"{c:>13}" for c in cols) + f" {'best / floor':>13}")
    for n in args.sizes:
        X = rng.standard_normal((n, n), dtype=np.float32)
        bits = (X.view(np.uint32) >> 16).astype(np.uint16)  # truncated to bfloat16
        A = rng.standard_normal((n, n), dtype=np.float32)
        v = rng.standard_normal(n).astype(np.float32)
        out = np.empty(n, np.float32)
        half, ones = bits.view(np.float32), np.ones(n // 2, np.float32)
        cases = {"numpy floor": lambda: half @ ones}
        if torch is not None:
            th, tones = torch.from_numpy(half), torch.from_numpy(ones)
            cases["torch floor"] = lambda: torch.mv(th, tones)
        for i in isas:
            cases[f"gemv16 {ISA[i]}"] = (lambda i=i: _fastc.gemv16(bits, v, out, i))
        if mkl:
            Xh = bits.view(_mkl._BF16)
            V = _mkl.columns(v, _mkl._BF16)
            cases["MKL 3 cols"] = lambda: _mkl.matvec(Xh, v, cols=V)
        t = {k: [] for k in cases}
        for _ in range(args.reps):
            for k, f in cases.items():
                A @ A
                t0 = time.perf_counter()
                f()
                t[k].append(time.perf_counter() - t0)
        m = {k: statistics.median(x) * 1e6 for k, x in t.items()}
        best = min(m[f"gemv16 {ISA[i]}"] for i in isas)
        print(f"{n:>6} " + " ".join(f"{m[c]:>13.0f}" for c in cols)
              + f" {best / m['numpy floor']:>13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
