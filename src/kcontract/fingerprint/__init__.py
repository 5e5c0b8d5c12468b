"""What a matrix unit really does: recover a kernel's recipe from black-box probes.

``fingerprint(kernel, op=..., dtype=...)`` calls a kernel in its own isolated
worker (like a check), runs the probes of its op kind and returns a
:class:`Recipe`: operand format and rounding, accumulator significand bits and
rounding mode, fused group size, promotion interval, subnormal handling and the
reduction order, each with a confidence and the evidence behind it.
:mod:`.designs` emulates matrix-unit designs bit for bit (and holds published
ones as calibration kernels); :mod:`.probes` builds the probes; :mod:`.recover`
estimates the recipe.
"""
from __future__ import annotations

from typing import Callable, Union

from ..formats import get_format
from .designs import IEEE_FP32, PUBLISHED, PUBLISHED_DTYPES, Design
from .recover import Field, Recipe, SweepPoint, recover
from .targets import TARGETS, KernelCaller, ProbeFailure, Target, target_for


def fingerprint(kernel: Union[str, Callable], *, op: str, dtype: str, framework: str = "numpy",
                device: str = "cpu", timeout: float = 60.0, in_process: bool = False) -> Recipe:
    """The recipe of ``kernel`` (a spec ``path.py:function`` / ``module:function`` run in
    an isolated worker, or a callable run here) for ``op`` at input ``dtype``."""
    fmt = get_format(dtype).name
    if callable(kernel):
        return recover(target_for(op, kernel, fmt), op)
    with KernelCaller(kernel, framework=framework, device=device, timeout=timeout,
                      in_process=in_process) as call:
        return recover(target_for(op, call, fmt), op)


__all__ = ["fingerprint", "recover", "Recipe", "Field", "SweepPoint", "Design",
           "IEEE_FP32", "PUBLISHED", "PUBLISHED_DTYPES", "TARGETS", "Target", "target_for",
           "KernelCaller", "ProbeFailure"]
