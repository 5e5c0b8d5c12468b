"""Matrix-unit designs and their bit-accurate numpy emulation.

A :class:`Design` says what a unit computes for one inner product
``sum_k a[k] * b[k]`` (a matmul element, a row sum):

1. each operand is rounded to ``operand_format`` by ``operand_rounding`` (a
   subnormal operand is read as zero with ``flush_inputs``);
2. products are exact (``products_exact``; otherwise each product is first rounded
   to the accumulator's bits);
3. the reduction runs in order over k in *fused groups* of ``fused_group``
   products: the accumulator and the group's products are summed exactly and
   rounded once, to ``accumulator_bits`` significand bits by
   ``accumulator_rounding`` (a group of 1 is a fused multiply-add);
4. with a ``promotion_interval`` P, the narrow accumulator restarts from zero
   every P products and its partial sum is added to a wide accumulator of
   ``wide_bits`` bits, rounded to nearest (DeepSeek-V3's fix of FP8 GEMMs:
   partial sums moved to fp32 CUDA cores every 128 products); with ``wide_bits``
   below ``accumulator_bits`` the same models wide blocks whose partial sums meet in
   a narrow workspace (``partials_rounded``: each partial stored in it first);
5. the result is rounded to nearest into the output format (a subnormal result
   is flushed to zero with ``flush_outputs``).

:data:`PUBLISHED` holds designs after published descriptions of real units
(MMA-Sim, arXiv 2511.10909; DeepSeek-V3; Fasi, Higham, Mikaitis and Pranesh).
They are models of the reported behaviour, used as calibration kernels, not
certified replicas of the silicon.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Optional

import numpy as np

from ..formats import get_format
from .rounding import exact_sum, flush_subnormal, round_bits, round_to_format


@dataclass(frozen=True)
class Design:
    name: str = "custom"
    operand_format: Optional[str] = None  # None: the input's own format
    operand_rounding: str = "nearest"
    accumulator_bits: int = 24
    accumulator_rounding: str = "nearest"
    fused_group: int = 1
    promotion_interval: Optional[int] = None
    wide_bits: int = 24
    #: each partial sum rounded to ``wide_bits`` before it is added (stored in the
    #: workspace's format first)
    partials_rounded: bool = False
    products_exact: bool = True
    flush_inputs: bool = False
    flush_outputs: bool = False
    output_format: Optional[str] = None  # None: the input's own format
    source: str = ""

    def with_(self, **kw) -> "Design":
        return replace(self, **kw)

    def as_dict(self) -> dict:
        return asdict(self)

    # -- emulation --------------------------------------------------------------
    def operands(self, x: np.ndarray, input_format: str) -> np.ndarray:
        fmt = self.operand_format or input_format
        x = np.asarray(x, dtype=np.float64)
        if self.flush_inputs:
            x = flush_subnormal(x, input_format)
        return round_to_format(x, fmt, self.operand_rounding, flush=self.flush_inputs)

    def dots(self, a: np.ndarray, b: Optional[np.ndarray], input_format: str,
             output_format: Optional[str] = None) -> np.ndarray:
        """Inner products of the rows of ``a`` and ``b`` ((R, K) each; ``b=None``: a row
        sum) as this design computes them, float64 values of the output format."""
        a = self.operands(a, input_format)
        prod = a if b is None else a * self.operands(b, input_format)
        prod = np.ascontiguousarray(prod.T)  # (K, R): one product column per step
        K, R = prod.shape
        p, mode, g = int(self.accumulator_bits), self.accumulator_rounding, int(self.fused_group)
        if not self.products_exact:
            prod = round_bits(prod, None, p, mode)
        chunk = int(self.promotion_interval) if self.promotion_interval else max(K, 1)
        wide = np.zeros(R)
        with np.errstate(invalid="ignore", over="ignore"):
            for c0 in range(0, K, chunk):
                acc = np.zeros(R)
                for g0 in range(c0, min(c0 + chunk, K), g):
                    cols = [prod[k] for k in range(g0, min(g0 + g, c0 + chunk, K))]
                    hi, lo = exact_sum(cols, start=acc)
                    acc = round_bits(hi, lo, p, mode)
                if self.promotion_interval:
                    part = (round_bits(acc, None, self.wide_bits, "nearest")
                            if self.partials_rounded else acc)
                    hi, lo = exact_sum([part], start=wide)
                    wide = round_bits(hi, lo, self.wide_bits, "nearest")
                else:
                    wide = acc
        out_fmt = output_format or self.output_format or input_format
        out = round_to_format(wide, out_fmt, "nearest")
        if self.flush_outputs:
            out = flush_subnormal(out, out_fmt)
        return out

    # -- as kernels (calibration) -----------------------------------------------
    def matmul(self, a, b):
        """``a (M, K) @ b (K, N)`` under this design, in the output format's dtype."""
        a = np.asarray(a)
        b = np.asarray(b)
        fmt = get_format(a.dtype).name
        M, K = a.shape
        N = b.shape[1]
        av = np.repeat(a.astype(np.float64), N, axis=0)
        bv = np.tile(b.astype(np.float64).T, (M, 1))
        out = self.dots(av, bv, fmt).reshape(M, N)
        return _store(out, self.output_format or fmt)

    def sum(self, x):
        """Row sums of ``x (R, K)`` under this design."""
        x = np.asarray(x)
        fmt = get_format(x.dtype).name
        lead = x.shape[:-1]
        out = self.dots(x.reshape(-1, x.shape[-1]).astype(np.float64), None, fmt)
        return _store(out.reshape(lead), self.output_format or fmt)


def _store(values, fmt) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values, dtype=np.float64).astype(get_format(fmt).dtype)


IEEE_FP32 = Design("ieee-fp32-fma", accumulator_bits=24, accumulator_rounding="nearest",
                   source="a sequential fp32 fused multiply-add loop (what an fp32 kernel "
                          "promises)")

#: designs after published measurements of matrix units (operand formats given by the
#: kernel's dtype unless stated)
PUBLISHED: dict[str, Design] = {d.name: d for d in [
    Design("volta-fp16", accumulator_bits=24, accumulator_rounding="toward_zero", fused_group=4,
           output_format="float32",
           source="V100 HMMA, fp32 accumulation: 23 fraction bits, truncation, groups of 4 "
                  "(MMA-Sim; Fasi et al.)"),
    Design("ampere-fp16", accumulator_bits=25, accumulator_rounding="toward_zero", fused_group=8,
           output_format="float32",
           source="A100/Ada HMMA, fp32 accumulation: 24 fraction bits, truncation, groups of 8 "
                  "(MMA-Sim)"),
    Design("hopper-fp16", accumulator_bits=26, accumulator_rounding="toward_zero",
           fused_group=16, output_format="float32",
           source="H100 HGMMA, fp32 accumulation: 25 fraction bits, truncation, groups of 16 "
                  "(MMA-Sim)"),
    Design("hopper-fp8", accumulator_bits=14, accumulator_rounding="toward_zero",
           fused_group=16, output_format="float32",
           source="H100/H800 FP8 GEMM: 13 fraction bits kept (DeepSeek-V3: about 14 bits; "
                  "MMA-Sim: 13), no promotion"),
    Design("hopper-fp8-promoted", accumulator_bits=14, accumulator_rounding="toward_zero",
           fused_group=16, promotion_interval=128, output_format="float32",
           source="DeepSeek-V3's FP8 GEMM: the 14-bit tensor-core accumulator promoted to fp32 "
                  "CUDA cores every 128 products"),
    Design("cdna3-fp16", accumulator_bits=24, accumulator_rounding="nearest", fused_group=8,
           output_format="float32",
           source="MI300 MFMA fp16/bf16: groups of 8 products summed exactly, then round to "
                  "nearest (MMA-Sim)"),
    Design("cdna3-fp8", accumulator_bits=24, accumulator_rounding="nearest", fused_group=16,
           output_format="float32",
           source="MI300 MFMA fp8: groups of 16 products summed exactly, then round to nearest "
                  "(MMA-Sim)"),
    Design("cdna2-fp16", accumulator_bits=24, accumulator_rounding="nearest", fused_group=4,
           flush_inputs=True, flush_outputs=True, output_format="float32",
           source="MI200 MFMA fp16/bf16: subnormal inputs and outputs flushed to zero (MMA-Sim)"),
]}

#: the input dtype each published design is exercised at
PUBLISHED_DTYPES = {"volta-fp16": "float16", "ampere-fp16": "float16", "hopper-fp16": "float16",
                    "hopper-fp8": "float8_e4m3fn", "hopper-fp8-promoted": "float8_e4m3fn",
                    "cdna3-fp16": "bfloat16", "cdna3-fp8": "float8_e4m3fn",
                    "cdna2-fp16": "float16"}

__all__ = ["Design", "IEEE_FP32", "PUBLISHED", "PUBLISHED_DTYPES"]
