"""Fingerprint torch.matmul and torch._scaled_mm on a CUDA device and record the recipes.

Run on a machine with a CUDA GPU (torch with CUDA):

    python benchmarks/gpu_fingerprint.py [--device cuda] [--out examples/gpu_fingerprint]

For each dtype the device supports it fingerprints ``torch.matmul`` (float32 with TF32
off and on, float16, bfloat16), ``torch._scaled_mm`` (float8_e4m3fn and float8_e5m2
operands with unit scales, float32 and bfloat16 outputs), the fused attention
``scaled_dot_product_attention`` (its p @ v accumulator and its scores' bits) and
``gelu(x @ w + b)``, each kernel in kcontract's
isolated worker, and writes one JSON file per kernel plus ``index.json`` (device name,
compute capability, torch and CUDA versions, one summary line per kernel) under the
output folder.  The kernels below are what the worker imports.  ``--device cpu`` runs
the plan on the CPU (a dry run that writes the CPU's recipes; use another ``--out``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.abspath(__file__)


# -- the kernels (imported by the worker from this file) --------------------------------

def matmul(a, b):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    return a @ b


def matmul_tf32(a, b):
    """float32 matmul with TF32 tensor cores allowed for this call only."""
    import torch
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def _scaled(a, b, out_dtype):
    import torch
    one = torch.ones((), device=a.device, dtype=torch.float32)
    # _scaled_mm wants b column-major
    return torch._scaled_mm(a, b.t().contiguous().t(), scale_a=one, scale_b=one,
                            out_dtype=out_dtype)


def scaled_mm_f32(a, b):
    import torch
    return _scaled(a, b, torch.float32)


def scaled_mm_bf16(a, b):
    import torch
    return _scaled(a, b, torch.bfloat16)


def sdpa(q, k, v, causal=False):
    """torch's fused attention (flash / memory-efficient kernels where the device has
    them): its p @ v accumulator and the bits of its scores."""
    import torch.nn.functional as F
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def linear_gelu(x, w, b):
    import torch.nn.functional as F
    return F.gelu(x @ w + b)


# -- the run -------------------------------------------------------------------------------

def plan(torch, device):
    if str(device).startswith("cpu"):  # a dry run of the plan (the CPU's own recipes)
        return (0, 0), [("matmul", "float32", "matmul"), ("matmul", "bfloat16", "matmul"),
                        ("sdpa", "float32", "attention"), ("linear_gelu", "float32",
                                                           "linear_gelu")]
    cap = torch.cuda.get_device_capability(device)
    jobs = [("matmul", "float32", "matmul"), ("matmul_tf32", "float32", "matmul"),
            ("matmul", "float16", "matmul")]
    if torch.cuda.is_bf16_supported():
        jobs.append(("matmul", "bfloat16", "matmul"))
    if cap >= (8, 9) and hasattr(torch, "_scaled_mm"):  # fp8 tensor cores: Ada, Hopper, later
        for dt in ("float8_e4m3fn", "float8_e5m2"):
            jobs += [("scaled_mm_f32", dt, "scaled_matmul"), ("scaled_mm_bf16", dt,
                                                               "scaled_matmul")]
    # the matmuls inside fused ops: attention's two products, linear_gelu's product
    jobs += [("sdpa", dt, "attention") for dt in ("float16", "bfloat16", "float32")
             if dt != "bfloat16" or torch.cuda.is_bf16_supported()]
    jobs += [("linear_gelu", "float32", "linear_gelu"), ("linear_gelu", "float16",
                                                         "linear_gelu")]
    return cap, jobs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "..", "examples",
                                                  "gpu_fingerprint"))
    args = ap.parse_args(argv)
    import torch
    if not str(args.device).startswith("cpu") and not torch.cuda.is_available():
        print("no CUDA device: nothing to fingerprint (--device cpu: a dry run of the plan)",
              file=sys.stderr)
        return 2
    from kcontract.fingerprint import ProbeFailure, fingerprint
    os.makedirs(args.out, exist_ok=True)
    cap, jobs = plan(torch, args.device)
    name = ("cpu" if str(args.device).startswith("cpu") else
            torch.cuda.get_device_name(args.device))
    index = {"device": name, "capability": list(cap),
             "torch": torch.__version__, "cuda": torch.version.cuda, "kernels": []}
    for fn, dtype, op in jobs:
        t0 = time.perf_counter()
        name = f"{fn}-{dtype}"
        try:
            r = fingerprint(f"{HERE}:{fn}", op=op, dtype=dtype, framework="torch",
                            device=args.device)
        except ProbeFailure as exc:
            print(f"{name:32s} failed: {exc}")
            index["kernels"].append({"kernel": name, "error": str(exc)})
            continue
        data = r.as_dict()
        data.update({"kernel": f"benchmarks/gpu_fingerprint.py:{fn}", "framework": "torch",
                     "device": index["device"]})
        with open(os.path.join(args.out, f"{name}.json"), "w") as fh:
            json.dump(data, fh, indent=2)
        line = f"{r.summary()}; order: {r.reduction_order}"
        index["kernels"].append({"kernel": name, "summary": line,
                                 "seconds": round(time.perf_counter() - t0, 1)})
        print(f"{name:32s} {line}")
    with open(os.path.join(args.out, "index.json"), "w") as fh:
        json.dump(index, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
