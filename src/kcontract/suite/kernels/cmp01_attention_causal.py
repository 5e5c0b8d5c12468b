"""Calibration of cmp01-attention-causal: the fused (FlashAttention-style) kernels of
cmp01-attention, called with causal=True.

bad: the software exp2 (a cubic on the fractional part, relative error up to 8.8e-5):
invisible to allclose(1e-2), several times the composed tolerance.
good: the same fused schedule with an exact float32 exp2 and the bottom-right mask.
"""
from .cmp01_attention import DTYPE, baseline, bad, good  # noqa: F401
