"""A square check's three float32 matrix-vector products (B r, A (B r), C r) by the
compiled helper's row kernel (``_fastc.rows_dot``, what every float32 product of a check
is where ``_fastc.own_gemv`` holds) against the back ends' own gemv: numpy's BLAS
(``X @ v``) with the kernel on numpy's OpenBLAS threads, and ``torch.mv`` with the kernel
on torch's OpenMP threads.

Each back end is measured on its own (its threads and the other library's do not meet):
each repetition times its two candidates in a fresh random order, each right after a
float32 product of the same size by that back end (as bench_freivalds_overhead.py times a
check); medians, microseconds, and the kernel's time over the back end's.

    python benchmarks/bench_rows_dot.py [--sizes 256 512 1024 2048 4096] [--reps 101]
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

from kcontract.freivalds import _cblas

try:
    from kcontract.freivalds import _fastc
except ImportError:  # pragma: no cover - the helper could not be built
    _fastc = None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 768, 1024, 2048, 4096])
    ap.add_argument("--reps", type=int, default=101)
    args = ap.parse_args(argv)
    if _fastc is None or not _fastc.own_gemv(1, 64):
        raise SystemExit("the helper's row kernel does not run here (no helper, or no AVX-512)")
    try:
        import torch
    except ImportError:
        torch = None
    print(f"medians of {args.reps} (fewer from n = 2048), each right after a float32 "
          "product; microseconds")
    print(f"{'n':>6} {'numpy gemv':>11} {'kernel':>9} {'ratio':>6}"
          + (f" {'torch.mv':>11} {'kernel':>9} {'ratio':>6}" if torch is not None else ""))
    rng = np.random.default_rng(0)
    for n in args.sizes:
        A, B = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        r = np.where(rng.random(n) < 0.5, -1.0, 1.0).astype(np.float32)
        C = A @ B
        y, z, w = (np.empty(n, np.float32) for _ in range(3))

        def kernel(pool, C):
            _fastc.rows_dot(B, r, y, pool)
            _fastc.rows_dot(A, y, z, pool)
            _fastc.rows_dot(C, r, w, pool)

        def numpy_product():
            return A @ B

        blas_pool = _cblas.pool_for(True)
        cases = {"numpy": (numpy_product, lambda C: (A @ (B @ r), C @ r)),
                 "numpy kernel": (numpy_product, lambda C: kernel(blas_pool, C))}
        if torch is not None:
            At, Bt, rt = torch.from_numpy(A), torch.from_numpy(B), torch.from_numpy(r)

            def torch_product():
                return (At @ Bt).numpy()
            torch_pool = _cblas.pool_for(False)
            cases["torch"] = (torch_product, lambda C: (torch.mv(At, torch.mv(Bt, rt)),
                                                        torch.mv(torch.from_numpy(C), rt)))
            cases["torch kernel"] = (torch_product, lambda C: kernel(torch_pool, C))
        t = {k: [] for k in cases}
        for lib in ("numpy", "torch"):
            items = [(k, v) for k, v in cases.items() if k.startswith(lib)]
            for _ in range(args.reps if n < 2048 else max(args.reps // 5, 9)):
                random.shuffle(items)
                for k, (product, f) in items:
                    C = product()
                    t0 = time.perf_counter()
                    f(C)
                    t[k].append(time.perf_counter() - t0)
        m = {k: statistics.median(v) * 1e6 for k, v in t.items()}
        line = f"{n:>6} {m['numpy']:>11.1f} {m['numpy kernel']:>9.1f} " \
               f"{m['numpy kernel'] / m['numpy']:>6.2f}"
        if torch is not None:
            line += f" {m['torch']:>11.1f} {m['torch kernel']:>9.1f} " \
                    f"{m['torch kernel'] / m['torch']:>6.2f}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
