"""kcontract: numerical contracts for ML kernels.

A specification language for what a kernel promises (accumulator precision,
ordering, exceptional values, shapes), a normative suite of twelve contract
classes, a checker that runs kernels in isolation and says which contract broke
and how, and runtime verification of matrix products.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import CheckerError, ContractError, UsageError  # noqa: E402


def check_kernel(*args, **kwargs):
    """Check a kernel against the suite; see :func:`kcontract.check.runner.check`."""
    from .check.runner import check as _check
    return _check(*args, **kwargs)


def __getattr__(name: str):
    # kcontract.define_op, imported on first use (the package itself stays light)
    if name == "define_op":
        from .ops.user import define_op
        return define_op
    raise AttributeError(f"module 'kcontract' has no attribute {name!r}")


__all__ = ["__version__", "check_kernel", "define_op", "ContractError", "CheckerError",
           "UsageError"]
