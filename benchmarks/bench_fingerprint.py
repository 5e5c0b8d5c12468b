"""``kcontract fingerprint``: the time of one fingerprint (target under 30 s on a 2-core
CPU) through the isolated worker, and the recovery table of every emulated design.

Each published design (``kcontract.fingerprint.PUBLISHED``) runs as a kernel; the table
shows the design's parameters beside the recovered ones and whether each was recovered
exactly (accumulator bits within one, rounding, group and interval exact)."""
from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = os.path.join(HERE, "..", "tests", "kernels", "fingerprint_designs.py")


def _iv(v):
    return "never" if v is None else str(v)


def main() -> int:
    from kcontract.fingerprint import PUBLISHED, PUBLISHED_DTYPES, fingerprint
    t0 = time.perf_counter()
    r = fingerprint(f"{KERNEL}:hopper_fp8_promoted", op="matmul", dtype="float8_e4m3fn")
    wall = time.perf_counter() - t0
    print(f"one fingerprint (hopper-fp8-promoted through the isolated worker): {wall:.1f} s, "
          f"{r.calls} calls   target < 30 s: {'met' if wall < 30 else 'NOT met'}")
    t0 = time.perf_counter()
    r = fingerprint(f"{KERNEL}:numpy_matmul", op="matmul", dtype="float32")
    print(f"one fingerprint (numpy fp32 matmul through the isolated worker): "
          f"{time.perf_counter() - t0:.1f} s, {r.calls} calls")
    print()
    head = (f"{'design':22s} {'dtype':14s} {'bits':>9s} {'rounding':>25s} {'group':>7s} "
            f"{'interval':>13s} {'flush in':>10s} {'s':>5s}  recovered")
    print(head)
    print("-" * len(head))
    ok_all = True
    for name, d in PUBLISHED.items():
        dtype = PUBLISHED_DTYPES[name]
        t0 = time.perf_counter()
        r = fingerprint(d.matmul, op="matmul", dtype=dtype)
        secs = time.perf_counter() - t0
        ok = (abs(r.accumulator_bits - d.accumulator_bits) <= 1
              and r.accumulator_rounding == d.accumulator_rounding
              and r.fused_group == d.fused_group
              and r.promotion_interval == d.promotion_interval
              and (r.subnormal_inputs == "flush") == d.flush_inputs)
        ok_all &= ok
        print(f"{name:22s} {dtype:14s} {d.accumulator_bits:>3d} / {r.accumulator_bits:<3d} "
              f"{d.accumulator_rounding:>11s} / {r.accumulator_rounding:<11s} "
              f"{d.fused_group:>2d} / {r.fused_group:<2d} "
              f"{_iv(d.promotion_interval):>5s} / {_iv(r.promotion_interval):<5s} "
              f"{str(d.flush_inputs)[0]} / {str(r.subnormal_inputs == 'flush')[0]}    "
              f"{secs:5.1f}  {'exact' if ok else 'NO'}")
    print("(design / recovered in each column)")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
