"""The op registry: one module per family of ops, each op a :class:`~.base.Op`."""
from __future__ import annotations

from ..errors import UsageError, did_you_mean
from .base import Op, upcast
from .families import DESCRIPTIONS as FAMILY_DESCRIPTIONS, FAMILIES
from . import linalg, reductions, attention, gather, elementwise

OPS: dict[str, Op] = {}
for _mod in (linalg, reductions, attention, gather, elementwise):
    for _op in _mod.OPS:
        OPS[_op.name] = _op


def _register(module: str) -> None:
    """Add the ops of one op module (one line per module below)."""
    from importlib import import_module
    for op in import_module(f"{__name__}.{module}").OPS:
        OPS[op.name] = op


_register("rmsnorm")
_register("silu_mul")
_register("cumsum")
_register("rope")
_register("topk")
_register("cross_entropy")
_register("scaled_matmul")
_register("conv2d")


def get_op(name: str) -> Op:
    if name not in OPS:
        raise UsageError(f"unknown op {name!r}{did_you_mean(name, OPS)}; known: {', '.join(OPS)}")
    return OPS[name]


__all__ = ["Op", "OPS", "get_op", "upcast", "FAMILIES", "FAMILY_DESCRIPTIONS"]
