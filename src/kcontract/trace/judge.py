"""One recorded op call against the suite, on the inputs it really had.

A call (a :class:`~.coverage.OpCall`) is judged by the suite's contracts of its op and
dtype whose measurement protocol can be applied to a single call: a judge per protocol
kind (:data:`JUDGES`).  ``compare`` contracts (C-PRC-01, C-PRC-04, ...) evaluate their
own tolerance and postcondition on the recorded inputs against the float64 oracle;
the ``oob`` contract (C-EXC-02) classifies what the call did with its out-of-range
indices (raised, clamped, zeroed, wrapped) against the declared policy.  A precision
violation is explained by the suite's own diagnosis helpers: which narrower operand
format's emulation reproduces the output, and how many accumulator bits the error
corresponds to.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

import numpy as np

from ..check.engine import Context
from ..language.claims import make_claims
from ..formats import get_format
from .coverage import OpCall


@dataclass
class Judgment:
    contract_id: str
    contract_class: str
    verdict: str  # pass | violation | error
    message: str = ""
    measured: Optional[float] = None
    allowed: Optional[float] = None
    ratio: Optional[float] = None  # measured / allowed at the worst element
    mismatched: int = 0
    total: int = 0
    cause: dict = field(default_factory=dict)  # code, summary, operand_format, ...
    tol: Optional[np.ndarray] = field(default=None, repr=False)  # elementwise tolerance

    def as_dict(self) -> dict:
        return {"contract_id": self.contract_id, "contract_class": self.contract_class,
                "verdict": self.verdict, "message": self.message, "measured": self.measured,
                "allowed": self.allowed, "ratio": self.ratio, "mismatched": self.mismatched,
                "total": self.total, "cause": self.cause}


Judge = Callable[..., Optional[Judgment]]


def _contracts(op: str, dtype: str):
    from ..suite import load_suite
    return [c for c in load_suite() if c.op == op and dtype in c.scope.dtypes
            and c.protocol.kind in JUDGES]


def _requires_met(contract, claims) -> bool:
    for key, want in (contract.scope.requires or {}).items():
        if getattr(claims.get(key), "name", claims.get(key)) != getattr(want, "name", want):
            return False
    return True


def judge_call(call: OpCall, *, raised: Optional[str] = None,
               declare: Optional[Mapping[str, str]] = None) -> list[Judgment]:
    """Every applicable contract's judgment of one call (``raised``: the error type when
    the call raised instead of returning)."""
    from ..ops import get_op
    op = get_op(call.op)
    fmt = get_format(call.dtype)
    claims = make_claims(fmt, {**(declare or {}), **call.declare})
    out = []
    for contract in _contracts(call.op, fmt.name):
        if not _requires_met(contract, claims):
            continue
        j = JUDGES[contract.protocol.kind](contract, op, fmt, claims, call, raised)
        if j is not None:
            out.append(j)
    return out


# -- compare: tolerance and postcondition on the recorded inputs --------------------------

def judge_compare(contract, op, fmt, claims, call: OpCall, raised) -> Optional[Judgment]:
    from ..classes.common import badness
    if raised is not None:
        if _has_oob(call):
            return None  # raising on an out-of-range index is C-EXC-02's business
        return Judgment(contract.id, contract.cls, "error",
                        f"the op raised {raised} on inputs the contract covers")
    if _has_oob(call):
        return None  # no oracle for out-of-range rows outside C-EXC-02
    ctx = Context(contract, op, fmt, claims, None, framework="torch")
    kw = dict(ctx.kwargs())
    kw.update(call.kwargs)
    case = ctx.case(op.solve_shape(call.inputs), "recorded")
    if "ref" not in call.memo:
        call.memo["ref"] = (np.asarray(ctx.reference(call.inputs, kw)[0], dtype=np.float64)
                            if call.oracle is None else
                            np.asarray(call.oracle(_upcast(call.inputs)), dtype=np.float64)
                            ).reshape(np.shape(call.out))
    ref = call.memo["ref"]
    try:
        cmp = ctx.evaluate(case, call.inputs, np.asarray(call.out), ref, extra=call.extra or None,
                           kwargs=kw)
    except (ValueError, KeyError):
        return None  # the contract needs quantities a single call does not provide
    st = cmp.stats()
    tol = None if cmp.tol is None else np.broadcast_to(cmp.tol, np.shape(cmp.out))
    j = Judgment(contract.id, contract.cls, "pass" if cmp.passed else "violation",
                 measured=st.get("measured"), allowed=st.get("allowed"),
                 ratio=float(badness(cmp)) if not cmp.passed else _ratio(cmp),
                 mismatched=cmp.mismatched, total=cmp.total, tol=tol)
    if cmp.passed:
        j.message = f"{cmp.total} elements within the tolerance"
    else:
        j.cause = precision_cause(ctx, cmp, call)
        j.message = (f"{cmp.mismatched} of {cmp.total} elements beyond the tolerance "
                     f"(worst: measured {st.get('measured'):.3g}, allowed {st.get('allowed'):.3g})"
                     + (f": {j.cause['summary']}" if j.cause.get("summary") else ""))
    return j


def _ratio(cmp) -> Optional[float]:
    if cmp.tol is None:
        return None
    err = cmp.error()
    tol = np.broadcast_to(cmp.tol, err.shape)
    with np.errstate(all="ignore"):
        r = np.where(err == 0, 0.0, err / np.maximum(tol, 1e-300))
    r = r[np.isfinite(r)]
    return float(r.max()) if r.size else 0.0


def _upcast(inputs: dict) -> dict:
    from ..ops import upcast
    return upcast(inputs)


def substitution(ctx: Context, cmp, call: OpCall) -> Optional[dict]:
    """Which narrower operand format's emulation (the call's floating inputs rounded to it,
    then the exact op) explains the output: the residual ``rms(out - emulation)`` as a
    share of ``rms(out - oracle)``, least first (the suite's substitution test, with the
    aten op's own reference: addmm's bias, mean's division)."""
    from ..classes.fingerprint import rounded
    from ..classes.precision import _narrower
    err = cmp.out - cmp.ref
    fin = np.isfinite(err)
    base = float(np.sqrt(np.mean(err[fin] ** 2))) if fin.any() else 0.0
    if base == 0.0:
        return None
    oracle = call.oracle or (lambda x: ctx.op.oracle(x, **{**ctx.kwargs(), **call.kwargs}))
    best = None
    for f in ("tfloat32", "float16", "bfloat16"):
        if not _narrower(f, ctx.dtype.name):
            continue
        xr = {k: (rounded(v, f) if np.asarray(v).dtype.kind == "f" else v)
              for k, v in call.inputs.items()}
        with np.errstate(all="ignore"):
            d = cmp.out - np.asarray(oracle(xr), np.float64).reshape(np.shape(cmp.out))
        ok = fin & np.isfinite(d)
        if ok.any():
            resid = float(np.sqrt(np.mean(d[ok] ** 2))) / base
            if best is None or resid < best["residual"]:
                best = {"format": f, "what": "operands", "residual": resid}
    return best


def precision_cause(ctx: Context, cmp, call: OpCall) -> dict:
    """What explains a precision violation on a recorded call: the narrower operand format
    whose emulation leaves the least of the error, else the accumulator precision the
    error corresponds to (the suite's ``_required_precision``)."""
    from ..classes.fingerprint import short
    from ..classes.precision import _required_precision
    declared = ctx.claims.accumulate.name
    if "substitution" not in call.memo:
        call.memo["substitution"] = substitution(ctx, cmp, call)
    sub = call.memo["substitution"]
    bits = _required_precision(ctx, [cmp])
    cause: dict = {"declared_accumulator": declared, "declared_operands": ctx.dtype.name}
    if bits is not None:
        cause["error_equivalent_bits"] = round(bits, 1)
    if sub is not None and sub["residual"] < 0.5:
        cause.update({"code": "C-PRC-04.operand-substitution", "operand_format": sub["format"],
                      "emulation_residual": round(sub["residual"], 3),
                      "summary": (f"{sub['what']} rounded to {short(sub['format'])} before the "
                                  f"product, {short(declared)} accumulation: an undeclared "
                                  f"format substitution (C-PRC-04); the emulation leaves "
                                  f"{sub['residual']:.1%} of the error")})
    elif bits is not None:
        cause.update({"code": f"{ctx.contract.cls}.{ctx.contract.signature.code}",
                      "summary": (f"the error corresponds to a ~{bits:.1f}-bit accumulator, "
                                  f"not the declared {short(declared)}")})
    return cause


# -- oob: what happened to the out-of-range indices ----------------------------------------

def _has_oob(call: OpCall) -> bool:
    idx = call.inputs.get("indices")
    table = call.inputs.get("table")
    if idx is None or table is None:
        return False
    return bool(np.any((idx < 0) | (idx >= table.shape[0])))


def judge_oob(contract, op, fmt, claims, call: OpCall, raised) -> Optional[Judgment]:
    from ..classes.exceptional import classify_rows, oob_conforms
    if not _has_oob(call):
        return None
    idx, table = call.inputs["indices"], call.inputs["table"]
    V = int(table.shape[0])
    bad = idx[(idx < 0) | (idx >= V)]
    sides = []
    if np.any(bad < 0):
        sides.append("negative ids")
    if np.any(bad >= V):
        sides.append(f"ids >= V = {V}")
    labels = {"raise"} if raised is not None else classify_rows(table, idx, call.out)
    declared = getattr(claims.oob, "name", claims.oob)
    declared = str(declared)
    if {"clamp", "wrap"} <= labels:
        # (index -V, say: clamping and wrapping give the same row; neither is established)
        seen = "clamp or wrap (the same rows for these ids)"
    else:
        seen = next((p for p in ("raise", "clamp", "wrap", "zero", "fill", "garbage")
                     if p in labels), "garbage")
        if seen == "fill":
            seen = "fill (NaN rows)"  # a deterministic fill, not garbage
    ok = oob_conforms(declared, labels)
    what = (f"{bad.size} out-of-range id(s) ({', '.join(sides)}; e.g. {int(bad[0])}): declared "
            f"oob={declared}, observed {seen}" + (f" ({raised})" if raised else ""))
    return Judgment(contract.id, contract.cls, "pass" if ok else "violation", what,
                    mismatched=0 if ok else int(bad.size), total=int(idx.size),
                    cause={} if ok else {"code": f"{contract.cls}.{contract.signature.code}",
                                         "declared": declared, "observed": seen,
                                         "summary": f"declared {declared}, observed {seen} "
                                                    f"on {', '.join(sides)}"})


#: protocol kind -> how a contract of that kind judges one recorded call
JUDGES: dict[str, Judge] = {"compare": judge_compare, "oob": judge_oob}
