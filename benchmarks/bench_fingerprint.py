"""``kcontract fingerprint``: the time of one fingerprint (target under 30 s on a 2-core
CPU) through the isolated worker, and the recovery table of every emulated design.

Each published design (``kcontract.fingerprint.PUBLISHED``) runs as a kernel; the table
shows the design's parameters beside the recovered ones and whether each was recovered
exactly (accumulator bits within one, rounding, group and interval exact).  Also one
fingerprint of the matmul inside linear_gelu and attention, and the time the recovered
recipe adds to a failing C-PRC-01/04 contract (run through the isolated worker, in the
sandbox the machine has), the split-K example among them."""
from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KERNEL = os.path.join(HERE, "..", "tests", "kernels", "fingerprint_designs.py")
SPLIT_K = os.path.join(HERE, "..", "examples", "fingerprint", "kernel.py") + ":matmul_split_k"


def _iv(v):
    return "never" if v is None else str(v)


def main() -> int:
    import subprocess
    from kcontract.fingerprint import PUBLISHED, PUBLISHED_DTYPES, fingerprint
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    t0 = time.perf_counter()
    r = fingerprint(f"{KERNEL}:hopper_fp8_promoted", op="matmul", dtype="float8_e4m3fn")
    wall = time.perf_counter() - t0
    print(f"one fingerprint (hopper-fp8-promoted through the isolated worker): {wall:.1f} s, "
          f"{r.calls} calls   target < 30 s: {'met' if wall < 30 else 'NOT met'}")
    t0 = time.perf_counter()
    r = fingerprint(f"{KERNEL}:numpy_matmul", op="matmul", dtype="float32")
    print(f"one fingerprint (numpy fp32 matmul through the isolated worker): "
          f"{time.perf_counter() - t0:.1f} s, {r.calls} calls")
    for fn, op in (("linear_gelu_bf16", "linear_gelu"), ("attention_fp16_scores", "attention")):
        t0 = time.perf_counter()
        r = fingerprint(f"{KERNEL}:{fn}", op=op, dtype="float32")
        print(f"one fingerprint ({op}, {fn}, isolated worker): {time.perf_counter() - t0:.1f} s, "
              f"{r.calls} calls: {r.summary()}")
    print()
    print("the recovered recipe in a failing C-PRC-01/04 (the check's extra time):")
    from kcontract.check.runner import check
    from kcontract.suite import get_contract
    for cid, spec in (("prc01-matmul", "kcontract.suite.kernels.prc_recipes:matmul_fp32_fp16acc"),
                      ("prc04-matmul", "kcontract.suite.kernels.prc_recipes:matmul_bf16_fp32"),
                      ("prc01-sum", "kcontract.suite.kernels.prc01_sum:bad"),
                      ("prc01-linear_gelu", "kcontract.suite.kernels.prc01_linear_gelu:bad"),
                      ("prc01-attention", "kcontract.suite.kernels.prc01_attention:bad"),
                      ("prc01-matmul", SPLIT_K)):
        c = get_contract(cid)
        res = check(spec, op=c.op, dtype="float32", contracts=[c]).results[0]
        rec = (res.signature or {}).get("recovered_recipe") or {}
        print(f"  {cid:18s} {spec.rsplit(':', 1)[1]:20s} contract {res.seconds:5.1f} s, "
              f"of which recovery "
              f"{rec.get('seconds', 0):4.1f} s ({rec.get('calls', 0)} calls): "
              f"{rec.get('summary') or rec.get('error')}")
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
