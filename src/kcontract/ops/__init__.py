"""The ops: one module per family of built-in ops, each op a :class:`~.base.Op`;
user-defined ops (:func:`define_op`) and third-party ones (entry points ``kcontract.ops``)
resolve through :mod:`.registry`.  ``docs/ops.md`` explains how to add an op."""
from __future__ import annotations

from .base import Lacks, Op, upcast
from .families import DESCRIPTIONS as FAMILY_DESCRIPTIONS, FAMILIES
from .registry import BUILTIN, get_op, known_names, op_reference, register, register_builtin
from .user import define_op
from . import linalg, reductions, attention, gather, elementwise
from . import rmsnorm, silu_mul, cumsum, rope, topk, cross_entropy, scaled_matmul, conv2d

for _mod in (linalg, reductions, attention, gather, elementwise, rmsnorm, silu_mul, cumsum,
             rope, topk, cross_entropy, scaled_matmul, conv2d):
    for _op in _mod.OPS:
        register_builtin(_op)

#: the built-in ops by name
OPS: dict[str, Op] = BUILTIN

__all__ = ["Op", "OPS", "Lacks", "get_op", "define_op", "known_names", "op_reference", "register",
           "upcast", "FAMILIES", "FAMILY_DESCRIPTIONS"]
