"""Claims honoured by every contract they affect, in one place the engine calls.

- ``approximation=tanh``: the reference of every contract of an op containing GELU is the
  declared (tanh) form, not only the fusion contract's, so the shape, exceptional-value and
  subnormal contracts judge the function the kernel promises.
- ``subnormals=flush``: a result the oracle puts in the subnormal range may be returned as
  zero (or as any value of magnitude below the smallest normal) by every contract; C-PRC-03
  itself judges the flush under its own tolerance.

``CLAIM_READERS`` says which claim affects what, and ``tests/test_claims_honoured.py`` walks
it against the suite.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

#: claim -> what honouring it means for every contract it affects
CLAIM_READERS = {
    "approximation": "the reference of every contract of a GELU op is the declared form",
    "subnormals": "a subnormal result may be flushed under every contract when flush is declared",
}


def reference(ctx, x: Mapping[str, np.ndarray], kwargs: dict) -> np.ndarray:
    """The contract's oracle under the declared claims (``approximation=tanh``: the tanh
    form, where the op has that approximation).  The ``policy`` oracle keeps its own rules
    for NaN and Inf (:func:`exceptional_reference` applies the approximation there)."""
    from ..classes.oracles import policy
    oracle = ctx.oracle
    ref = oracle(ctx, x, kwargs) if oracle is not None else ctx.op.oracle(x, **kwargs)
    if oracle is policy:
        return ref
    alt = ctx.op.approximate(x, ctx.claims.approximation, **kwargs)
    return ref if alt is None else alt


def honour_flush(ctx, ok: np.ndarray, out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """``ok`` with subnormal results flushed accepted where ``subnormals=flush`` is declared."""
    if ctx.claims.subnormals != "flush" or ctx.contract.cls == "C-PRC-03" or out is None:
        return ok
    tiny = ctx.op.output_format(ctx.dtype).tiny
    with np.errstate(all="ignore"):
        r = np.asarray(ref, dtype=np.float64)
        o = np.asarray(out, dtype=np.float64)
        flushed = (np.abs(r) < tiny) & (np.abs(o) < tiny) & np.isfinite(r)
    return np.asarray(ok, dtype=bool) | np.broadcast_to(flushed, np.shape(ok))


def exceptional_reference(ctx, inputs: Mapping[str, np.ndarray], ref: np.ndarray) -> np.ndarray:
    """The exceptional-value protocol's reference with the declared approximation at finite
    results (its own rules for NaN and Inf stay)."""
    from ..ops import upcast
    with np.errstate(all="ignore"):
        declared = ctx.op.approximate(dict(upcast(inputs)), ctx.claims.approximation,
                                      **ctx.kwargs())
    if declared is None:
        return ref
    return np.where(np.isfinite(ref) & np.isfinite(declared), declared, ref)
