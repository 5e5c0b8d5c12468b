"""Runtime verification of matrix products (Freivalds' check) with
floating-point-aware, per-element decisions.

Public API::

    verify(a, b, c, *, rounds=1, seed=None, accumulate=None, output_format=None,
           false_alarm=1e-9, max_rows=32, localize=True, repair=False) -> FreivaldsResult
    check_product(a, b, c, *, accumulate, output_format, false_alarm=1e-9) -> FreivaldsResult
    guard(sample=1.0, on_fail="raise", ...)        # torch context manager / decorator
    verify_matmul_files(a_path, b_path, c_path, *, rounds, seed, accumulate, as_json) -> int

torch is imported only when a tensor is passed (or a guard is entered).  The
model and its bounds are documented in docs/freivalds.md.
"""
from ._core import (
    DEFAULT_FALSE_ALARM,
    FreivaldsResult,
    NonFiniteOperandError,
    ProductCheckError,
    Suspect,
    check_product,
    verify,
)
from ._files import load_operand, render_result, verify_matmul_files
from ._guard import Guard, GuardStats, guard

__all__ = [
    "DEFAULT_FALSE_ALARM", "FreivaldsResult", "Guard", "GuardStats", "NonFiniteOperandError",
    "ProductCheckError", "Suspect", "check_product", "guard", "load_operand", "render_result",
    "verify", "verify_matmul_files",
]
