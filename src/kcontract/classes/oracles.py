"""The oracles a contract's ``oracle:`` part names, as computations.

The runner resolves a contract's oracle here and hands it to the engine, whose
``Context.reference`` then computes it: ``ORACLE_REFERENCES[name](ctx, x, kwargs)``
returns the float64 reference on the upcast inputs ``x``.  The names and their meaning
are the contract language's (:data:`kcontract.language.registry.ORACLES`); which
oracles a protocol measures against is part of its declaration, checked when a
contract file is loaded.
"""
from __future__ import annotations

from typing import Callable

import numpy as np


def fp64(ctx, x, kw) -> np.ndarray:
    """The op's float64 oracle."""
    return ctx.op.oracle(x, **kw)


def unfused(ctx, x, kw) -> np.ndarray:
    """The unfused float64 composition of the op's stages (its oracle), or the declared
    approximation of one of them where the op has it (``approximation=tanh``)."""
    alt = ctx.op.approximate(x, ctx.claims.approximation, **kw)
    return ctx.op.oracle(x, **kw) if alt is None else alt


def policy(ctx, x, kw) -> np.ndarray:
    """The float64 reference under the declared ``nan`` policy (the op's
    ``policy_reference``); the exceptional protocol also takes its quantities."""
    return ctx.op.policy_reference(x, ctx.claims.nan, **kw)[0]


def self_(ctx, x, kw) -> np.ndarray:
    """The protocol compares the kernel with itself; the float64 oracle still provides
    the tolerance quantities (``mag``, ``n``)."""
    return ctx.op.oracle(x, **kw)


ORACLE_REFERENCES: dict[str, Callable] = {"fp64": fp64, "unfused": unfused, "policy": policy,
                                          "self": self_}
