"""Overhead of kcontract.freivalds.verify relative to the product it checks.

For square float32 matrices, every repetition times C = A @ B and then
verify(A, B, C) (default settings, threshold included) back to back; the ratio
is taken per repetition and the median reported (the smallest ratio too: on
a shared machine it shows what an undisturbed repetition costs).  numpy and
torch (CPU) are measured side by side in one run, and torch on an accelerator
(cuda) too when one is present.  "floor" is the time of the
three bare matrix-vector products the check is made of (B r, A (B r), C r with
a +-1 vector r: one streaming pass per matrix, the least any check reading A,
B and C once can do), timed the same way: right after a matmul, in the same
repetition.  The matmul, the check and the floor all run on the library's own
thread pool (OpenBLAS for numpy, ATen/MKL for torch) with the thread counts
printed in the header; the load average is printed before and after, since a
busy machine inflates every figure.

    python benchmarks/bench_freivalds_overhead.py            # n = 1024 .. 8192
    python benchmarks/bench_freivalds_overhead.py --quick    # n = 1024, 2048
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import statistics
import time

import numpy as np

from kcontract.freivalds import guard, verify

TARGETS = {4096: 0.010, 8192: 0.006}


def openblas_threads() -> str:
    """Threads of numpy's OpenBLAS (read from the loaded library), if found."""
    try:
        with open("/proc/self/maps") as fh:
            libs = sorted({ln.split()[-1] for ln in fh if "openblas" in ln.lower()})
        for path in libs:
            lib = ctypes.CDLL(path)
            for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                         "openblas_get_num_threads"):
                if hasattr(lib, name):
                    f = getattr(lib, name)
                    f.restype = ctypes.c_int
                    return str(f())
    except OSError:
        pass
    return "unknown"


def measure(matmul, check, floor, reps: int):
    matmul(), check(matmul())  # warm up
    t_mm, t_v, t_f, ratios, floors = [], [], [], [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        C = matmul()
        t1 = time.perf_counter()
        res = check(C)
        t2 = time.perf_counter()
        assert res.passed, "honest product failed"
        t_mm.append(t1 - t0)
        t_v.append(t2 - t1)
        ratios.append((t2 - t1) / (t1 - t0))
        del C
        t3 = time.perf_counter()
        C = matmul()  # the floor, measured in the same position: right after a matmul
        t4 = time.perf_counter()
        floor(C)
        t5 = time.perf_counter()
        t_f.append(t5 - t4)
        floors.append((t5 - t4) / (t4 - t3))
        del C
    med = statistics.median
    return {"matmul_s": med(t_mm), "verify_s": med(t_v), "floor_s": med(t_f),
            "ratio": med(ratios), "ratio_min": min(ratios), "floor": med(floors),
            "floor_min": min(floors), "ratios": ratios}


def accelerators(torch, wanted: str) -> list[str]:
    """The accelerator devices to measure: ``--device auto`` takes cuda when torch sees
    one (the product in full float32: TF32 stays off, torch's default for matmul)."""
    if wanted == "none":
        return []
    if wanted == "auto":
        return ["cuda"] if torch.cuda.is_available() else []
    return [wanted]


def device_backend(torch, dev: str, A, B, r):
    """matmul, check and floor on ``dev``; each waits for the device, so the host clock
    measures the work (verify's verdict is a host bool, which waits by itself)."""
    Ad, Bd, rd = (torch.from_numpy(x).to(dev) for x in (A, B, r))
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)

    def mm():
        C = Ad @ Bd
        sync()
        return C

    def floor(C):
        out = (torch.mv(Ad, torch.mv(Bd, rd)), torch.mv(C, rd))
        sync()
        return out
    return mm, (lambda C: verify(Ad, Bd, C)), floor


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="n = 1024, 2048 only")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--device", default="auto",
                    help="accelerator rows besides numpy and torch CPU: auto (cuda when present), "
                         "none, or a torch device string")
    ap.add_argument("--json", help="write the measurements to this file")
    args = ap.parse_args(argv)
    sizes = [1024, 2048] if args.quick else args.sizes
    try:
        if args.no_torch:
            raise ImportError
        import torch
    except ImportError:
        torch = None
    print(f"machine: {platform.machine()}, {os.cpu_count()} logical CPUs; "
          f"numpy {np.__version__} (OpenBLAS threads: {openblas_threads()})"
          + (f"; torch {torch.__version__} (threads: {torch.get_num_threads()})" if torch else ""))
    print(f"load average: {load_average()}")
    print(f"median of {args.reps} repetitions ((min): the smallest); "
          "ratio = verify time / matmul time (float32)")
    hdr = (f"{'n':>6} {'backend':>8} {'matmul ms':>10} {'verify ms':>10} {'ratio':>8} "
           f"{'(min)':>8} {'floor':>8} {'(min)':>8} {'target':>10}")
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for n in sizes:
        rng = np.random.default_rng(n)
        A = rng.standard_normal((n, n), dtype=np.float32)
        B = rng.standard_normal((n, n), dtype=np.float32)
        r = np.where(rng.random(n) < 0.5, -1.0, 1.0).astype(np.float32)
        backends = [("numpy", lambda: A @ B, lambda C: verify(A, B, C),
                     lambda C: (A @ (B @ r), C @ r))]
        if torch is not None:
            At, Bt, rt = torch.from_numpy(A), torch.from_numpy(B), torch.from_numpy(r)
            backends.append(("torch", lambda: At @ Bt, lambda C: verify(At, Bt, C),
                             lambda C: (torch.mv(At, torch.mv(Bt, rt)), torch.mv(C, rt))))
            for dev in accelerators(torch, args.device):
                backends.append((dev, *device_backend(torch, dev, A, B, r)))
        for name, mm, chk, fl in backends:
            m = measure(mm, chk, fl, args.reps)
            tgt = TARGETS.get(n)
            flag = "" if tgt is None else (f"<={tgt:.1%}" + (" ok" if m["ratio"] <= tgt else " MISS"))
            print(f"{n:>6} {name:>8} {m['matmul_s'] * 1e3:>10.1f} {m['verify_s'] * 1e3:>10.2f} "
                  f"{m['ratio']:>8.2%} {m['ratio_min']:>8.2%} {m['floor']:>8.2%} "
                  f"{m['floor_min']:>8.2%} {flag:>10}", flush=True)
            rows.append({"n": n, "backend": name, **m})
        del A, B
    if torch is not None:
        # the guard on an inference Linear layer: the weight's B r is cached
        torch.manual_seed(0)
        lin = torch.nn.Linear(4096, 4096, bias=True)
        x = torch.randn(2048, 4096)
        with torch.no_grad():
            lin(x)
            t_plain, t_g = [], []
            g = guard(on_fail="raise")
            for _ in range(args.reps):
                t0 = time.perf_counter()
                lin(x)
                t1 = time.perf_counter()
                with g:
                    lin(x)
                t2 = time.perf_counter()
                t_plain.append(t1 - t0)
                t_g.append(t2 - t1)
        t_lin = statistics.median(t_plain)
        per_check = g.stats.seconds / max(g.stats.checked, 1)
        print(f"guard on nn.Linear(4096, 4096), batch 2048 (torch, weight vector cached): "
              f"linear {t_lin * 1e3:.1f} ms, check {per_check * 1e3:.2f} ms per call "
              f"({per_check / t_lin:.2%}); checked {g.stats.checked}, failed {g.stats.failed}, "
              f"cache hits {g.stats.cache_hits}")
        rows.append({"guard_linear_s": t_lin, "guard_check_s": per_check})
    print(f"load average: {load_average()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
