"""The exceptional-values family (C-EXC-01..02): protocols and signature detectors.

Protocols
    ``exceptional``  (C-EXC-01) NaN, +Inf and -Inf injected at chosen positions of
                     the op's first input (and of ``b`` for matmul), a row holding
                     +Inf with -Inf and one holding NaN with +Inf, finite inputs
                     whose results overflow the output format, and clean cases.
                     The reference is the op's float64 oracle under the declared
                     ``nan`` policy (:func:`policy_reference`); with ``nan=raise``
                     every call on a non-finite input must raise instead.
    ``oob``          (C-EXC-02) embedding calls with one out-of-range index value
                     each (-1, -V, -V-1, -2**31; V, V+1, 2**31-1) mixed with in-range
                     ones, plus an all-in-range control call; each call's behaviour is
                     classified (raise, clamp, zero, wrap, garbage, crash, hang) and
                     compared with the declared ``oob`` policy.

Detectors
    ``exceptional_values``  what went wrong, by position: NaN or Inf swallowed (with the
                            input position that carried it and what replaced it), Inf
                            where NaN was due or the reverse, new NaN/Inf on finite
                            inputs, and the overflow behaviour observed against the
                            declared one.
    ``oob_behaviour``       the behaviour observed below 0 and at or above V, per index,
                            against the declared policy.

The ``mask`` policy, per op (also in docs/suite-exceptional.md): a non-finite input
element is *absent*.  sum and matmul: it contributes nothing (as if zero); softmax:
its probability is 0 and the row renormalises over the finite logits (a row with no
finite logit is all zeros); layernorm: mean and variance are taken over the row's
finite elements and the output at an absent position is 0 (a row with none is all
zeros); gelu and cast: the output at an absent position is 0.
"""
from __future__ import annotations

import math
import time
from typing import Any, Optional

import numpy as np

from ..check.engine import Comparison, Context
from ..language.registry import detector, protocol
from ..ops import upcast
from ..ops._math import gelu as _gelu, softmax as _softmax
from ..ops.families import get_family, inject
from ..ops.gather import expected_rows

KINDS = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}
POLICIES = ("propagate", "mask", "raise")


# -- classes of values ---------------------------------------------------------------------

def value_class(v) -> np.ndarray:
    """'nan', '+inf', '-inf' or 'finite', elementwise."""
    v = np.asarray(v, dtype=np.float64)
    out = np.full(v.shape, "finite", dtype=object)
    out[np.isnan(v)] = "nan"
    out[np.isposinf(v)] = "+inf"
    out[np.isneginf(v)] = "-inf"
    return out


def _label(c: str) -> str:
    return {"nan": "NaN", "+inf": "+Inf", "-inf": "-Inf", "finite": "finite"}[c]


def _fmt_value(v: float) -> str:
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "-0" if np.signbit(v) else "0"
    return f"{v:.4g}"


# -- the reference under a policy -------------------------------------------------------------

def _ieee_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The IEEE 754 float64 sum of products, independent of any BLAS: every term
    a[i,k] * b[k,j] formed, then summed (NaN from Inf*0 and Inf - Inf as IEEE says)."""
    with np.errstate(all="ignore"):
        terms = a[..., :, :, None] * b[..., None, :, :]
        return np.sum(terms, axis=-2)


def _masked_layernorm(x, w, b, eps):
    present = np.isfinite(x)
    cnt = np.sum(present, axis=-1, keepdims=True)
    xz = np.where(present, x, 0.0)
    with np.errstate(all="ignore"):
        mu = np.sum(xz, axis=-1, keepdims=True) / np.maximum(cnt, 1)
        dev = np.where(present, x - mu, 0.0)
        var = np.sum(dev * dev, axis=-1, keepdims=True) / np.maximum(cnt, 1)
        sd = np.sqrt(var + eps)
        ref = np.where(present, dev / sd * w + b, 0.0)
        kappa = np.sum(np.abs(xz), axis=-1, keepdims=True) / np.maximum(cnt, 1) / sd
        xhat = np.abs(dev) / sd
    q = {"mag": np.where(present, np.abs(w) * (1.0 + xhat), 0.0), "kappa": kappa, "xhat": xhat}
    return ref, q


def policy_reference(op, inputs: dict, policy: str, kw: Optional[dict] = None):
    """The float64 reference under the ``nan`` policy (``raise`` behaves as ``propagate``
    on the inputs where it returns).  Returns ``(ref, x, extra)``: ``x`` the inputs the
    tolerance quantities are computed from, ``extra`` names that override or add to the
    op's quantities (``alt``/``has_alt``: a second accepted result, see below)."""
    kw = dict(kw or {})
    x = upcast(inputs)
    name = op.name
    extra: dict[str, Any] = {}
    if policy == "mask":
        fin = {k: (np.where(np.isfinite(v), v, 0.0) if v.dtype.kind == "f" else v)
               for k, v in x.items()}
        if name == "softmax":
            xs = x["x"]
            present = np.isfinite(xs)
            with np.errstate(all="ignore"):
                p = _softmax(np.where(present, xs, -np.inf))
                p = np.where(np.any(present, axis=-1, keepdims=True), p, 0.0)
                m = np.max(np.where(present, xs, -np.inf), axis=-1, keepdims=True)
                spread = np.where(present, m - xs, 0.0)
            extra.update(mag=np.abs(p), spread=np.abs(spread))
            ref, xq = p, {"x": np.where(present, xs, 0.0)}
        elif name == "layernorm":
            ref, q = _masked_layernorm(x["x"], x["weight"], x["bias"], kw.get("eps", 1e-5))
            extra.update(q)
            xq = fin
        elif name in ("gelu", "cast"):
            xq = fin
            ref = _gelu(fin["x"]) if name == "gelu" else fin["x"].copy()
        elif name == "matmul":
            xq = fin
            ref = _ieee_matmul(fin["a"], fin["b"])
        else:
            xq = fin
            ref = op.oracle(fin, **kw)
        extra.setdefault("alt", np.zeros_like(ref))
        extra.setdefault("has_alt", np.zeros_like(ref))
        return ref, xq, extra
    if name == "matmul":
        ref = _ieee_matmul(x["a"], x["b"])
    else:
        ref = op.oracle(x, **kw)
    alt = np.zeros_like(ref)
    has_alt = np.zeros_like(ref)
    if name == "gelu":
        # At an infinite input gelu's value is a limit: x*Phi(x) gives +Inf at +Inf and
        # the indeterminate -Inf*0 = NaN at -Inf; the other accepted outcome is NaN at
        # +Inf (implementations whose erf meets Inf*0) and the limit 0 at -Inf.
        xs = x["x"]
        alt = np.where(np.isposinf(xs), np.nan, np.where(np.isneginf(xs), -0.0, 0.0))
        has_alt = np.where(np.isinf(xs), 1.0, 0.0)
    extra.update(alt=alt, has_alt=has_alt)
    return ref, x, extra


# -- inputs ---------------------------------------------------------------------------------

def _target(op) -> str:
    return "a" if op.name == "matmul" else op.inputs[0]


def _store_like(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values, dtype=np.float64).astype(like.dtype)


def _mixed(values: np.ndarray, rng) -> tuple[np.ndarray, list]:
    """+Inf and -Inf in one row, NaN and +Inf in another (2-D arrays; for 1-D: the first
    four positions)."""
    out = np.array(values, dtype=np.float64, copy=True)
    placed = []
    if out.ndim >= 2 and out.shape[-1] >= 2:
        rows = rng.choice(out.shape[-2], size=min(2, out.shape[-2]), replace=False)
        plan = [("inf", "-inf"), ("nan", "inf")]
        for r, kinds in zip(rows, plan):
            cols = rng.choice(out.shape[-1], size=2, replace=False)
            for c, k in zip(cols, kinds):
                idx = (0,) * (out.ndim - 2) + (int(r), int(c))
                out[idx] = KINDS[k]
                placed.append((idx, k))
    else:
        flat = out.reshape(-1)
        for i, k in enumerate(("inf", "-inf", "nan")[: flat.size]):
            flat[i] = KINDS[k]
            placed.append((np.unravel_index(i, out.shape), k))
    return out, placed


def _overflow_inputs(ctx: Context, shape: dict, rng) -> Optional[dict]:
    """Finite inputs whose results overflow the output format in some positions
    (matmul, sum, cast), or probe finite-in, finite-out at extreme magnitudes
    (softmax: the logits family; layernorm: the large family; gelu: |x| up to max/4)."""
    op, fmt = ctx.op, ctx.op.output_format(ctx.dtype)
    name = op.name
    fmax = float(fmt.max)
    if name == "matmul":
        M, K, N = shape["M"], shape["K"], shape["N"]
        s = np.where(np.arange(M) % 2 == 0, 1.0, -1.0)
        r = 2.0 ** np.linspace(-2.0, 2.0, M)
        sa = math.sqrt(fmax / K)
        # all-positive terms in a row (its sign applied to the whole row): the partial
        # sums grow monotonically, so overflow happens exactly where the result overflows
        a = (s * r)[:, None] * sa * rng.uniform(0.5, 1.5, (M, K))
        b = sa * rng.uniform(0.5, 1.5, (K, N))
        return {"a": op._store(a, op.input_format("a", ctx.dtype)),
                "b": op._store(b, op.input_format("b", ctx.dtype))}
    if name == "sum":
        R, N = shape["R"], shape["N"]
        s = np.where(np.arange(R) % 2 == 0, 1.0, -1.0)
        r = 2.0 ** np.linspace(-2.0, 2.0, R)
        x = (s * r)[:, None] * (fmax / N) * rng.uniform(0.5, 1.5, (R, N))
        return {"x": op._store(x, op.input_format("x", ctx.dtype))}
    if name == "cast":
        R, N = shape["R"], shape["N"]
        f32max = float(np.finfo(np.float32).max)
        hi = min(16.0 * fmax, f32max)
        mags = np.exp(rng.uniform(math.log(fmax / 2), math.log(hi), (R, N)))
        flat = mags.reshape(-1)
        edges = [fmax, min(f32max, fmax * (1 + 2.0 ** -fmt.precision)), hi]
        flat[: len(edges)] = edges
        x = mags * np.where(rng.random((R, N)) < 0.5, -1.0, 1.0)
        x = np.minimum(np.abs(x), f32max) * np.sign(x)
        return {"x": op._store(x, np.float32)}
    if name == "softmax":
        return op.generate(shape, ctx.dtype, "logits", rng)
    if name == "layernorm":
        return op.generate(shape, ctx.dtype, "large", rng)
    if name == "gelu":
        R, N = shape["R"], shape["N"]
        x = fmax * rng.uniform(1.0 / 64, 0.25, (R, N)) * np.where(rng.random((R, N)) < 0.5, -1, 1)
        return {"x": op._store(x, op.input_format("x", ctx.dtype))}
    return None


def exceptional_cases(ctx: Context):
    """(case, inputs, placed) for every probe; ``placed``: [(input, index, kind)]."""
    count = int(ctx.param("count", 2))
    op = ctx.op
    tgt = _target(op)
    for shape in ctx.shapes():
        for family in ctx.protocol.families:
            for trial in range(ctx.protocol.trials):
                base = ctx.inputs(shape, family, trial)
                yield ctx.case(shape, family, trial, probe="finite"), base, []
                rng = ctx.rng(op.describe_shape(shape), family, trial, "exceptional")
                probes = [(k, tgt, (k,)) for k in ("nan", "inf", "-inf")] + [("mixed", tgt, None)]
                if op.name == "matmul":
                    probes.append(("b", "b", ("nan", "inf", "-inf")))
                for label, name, kinds in probes:
                    vals = upcast({name: base[name]})[name]
                    if kinds is None:
                        new, pos = _mixed(vals, rng)
                    else:
                        new, pos = inject(vals, rng, kinds=kinds, count=count)
                    inputs = dict(base)
                    inputs[name] = _store_like(new, base[name])
                    placed = [(name, tuple(int(i) for i in idx), k) for idx, k in pos]
                    yield ctx.case(shape, family, trial, probe=label), inputs, placed
            if ctx.param("overflow", True):
                rng = ctx.rng(op.describe_shape(shape), "overflow")
                inputs = _overflow_inputs(ctx, shape, rng)
                if inputs is not None:
                    yield ctx.case(shape, "overflow", 0, probe="overflow"), inputs, []


# -- the protocol ------------------------------------------------------------------------------

def _placed_text(placed, limit: int = 3) -> str:
    parts = [f"{_label({'inf': '+inf'}.get(k, k))} at {n}[{', '.join(map(str, i))}]"
             for n, i, k in placed[:limit]]
    more = f" (+{len(placed) - limit} more)" if len(placed) > limit else ""
    return ", ".join(parts) + more


@protocol("exceptional",
          params={"count": (int, 2), "overflow": (bool, True), "kwargs": (dict, {})},
          provides=("alt", "has_alt"),
          description="NaN/+Inf/-Inf injected at chosen positions, mixed rows, overflow-"
                      "provoking finite inputs and clean cases; reference: the float64 "
                      "oracle under the declared nan policy; nan=raise: calls on non-finite "
                      "inputs must raise")
def exceptional(ctx: Context):
    t0 = time.perf_counter()
    policy = ctx.claims.nan
    records: list[dict] = []
    comps: list[Comparison] = []
    for case, inputs, placed in exceptional_cases(ctx):
        t1 = time.perf_counter()
        ref, xq, extra = policy_reference(ctx.op, inputs, policy, ctx.kwargs())
        ctx.timings["oracle"] += time.perf_counter() - t1
        res = ctx.call(inputs)
        rec = {"case": case, "inputs": inputs, "placed": placed, "status": res.status,
               "error": res.describe() if not res.ok else "", "cmp": None}
        records.append(rec)
        overflowing = not placed and bool(np.any(~np.isfinite(ref)))
        if placed and policy == "raise":
            rec["finding"] = None if res.status == "raised" else (
                "returned" if res.ok else res.status)
            continue
        if placed and res.status in ("raised", "crashed", "timeout"):
            rec["finding"] = res.status
            continue
        if policy == "raise" and overflowing and res.status == "raised":
            continue  # raising instead of returning a non-finite result is allowed
        out = ctx.validate(res, case, inputs)
        cmp = ctx.evaluate(case, inputs, out, ref, x=xq, extra=extra)
        rec["cmp"] = cmp
        comps.append(cmp)
    findings = [r for r in records if r.get("finding")]
    failing = [c for c in comps if not c.passed]
    rows = [{"case": r["case"].describe(), "probe": r["case"].extra.get("probe"),
             "status": r["status"], "finding": r.get("finding"),
             "passed": (not r.get("finding")) and (r["cmp"] is None or r["cmp"].passed),
             "mismatched": r["cmp"].mismatched if r["cmp"] is not None else None,
             "injected": _placed_text(r["placed"]) if r["placed"] else ""} for r in records]
    details = {"cases": rows, "policy": policy, "overflow": ctx.claims.overflow}
    if not findings and not failing:
        return ctx.passed(f"{len(records)} cases conform (nan={policy}, "
                          f"overflow={ctx.claims.overflow})", details=details,
                          seconds=time.perf_counter() - t0)
    sig = ctx.run_detector({"records": records, "comparisons": comps, "policy": policy})
    headline = sig.pop("summary", None) or ctx.contract.signature.summary
    nbad = len(findings) + len(failing)
    message = f"{headline} ({nbad} of {len(records)} cases fail)"
    if failing:
        from .common import worst
        v = ctx.violation(worst(failing), message=message, quantities=sig)
    else:
        v = ctx.violation(None, message=message, quantities=sig, case=findings[0]["case"])
    return ctx.violated(v, signature=sig, details=details, seconds=time.perf_counter() - t0)


# -- the detector ------------------------------------------------------------------------------

def _sources(op, placed, idx: tuple) -> list:
    """The injected input elements the output element ``idx`` depends on."""
    name = op.name
    out = []
    for n, pos, k in placed:
        if name == "matmul":
            if (n == "a" and pos[-2] == idx[-2]) or (n == "b" and pos[-1] == idx[-1]):
                out.append((n, pos, k))
        elif name == "sum":
            if pos[:-1] == tuple(idx):
                out.append((n, pos, k))
        elif name in ("softmax", "layernorm") or getattr(op, "dependence", None) == "row":
            # ``dependence``: an op's own statement of which input elements an output
            # element depends on ("row": its whole row), for ops without a branch here
            if pos[:-1] == tuple(idx[:-1]):
                out.append((n, pos, k))
        elif pos == tuple(idx):
            out.append((n, pos, k))
    return out


def _at(idx) -> str:
    return "out[" + ", ".join(str(int(i)) for i in idx) + "]"


def _replacement(ctx: Context, rec: dict, mask: np.ndarray) -> str:
    """What a kernel put where a NaN/Inf was due: 0, +-max, a uniform row, the mask
    result, or other finite values."""
    cmp: Comparison = rec["cmp"]
    out = cmp.out
    vals = out[mask]
    fmt = ctx.op.output_format(ctx.dtype)
    if vals.size and np.all(vals == 0):
        return "replaced by 0"
    if vals.size and np.all(np.abs(vals) == fmt.max):
        return "replaced by +-max (as numpy.nan_to_num does)"
    if ctx.op.name == "softmax":
        rows = np.unique(np.nonzero(mask)[0])
        n = out.shape[-1]
        if rows.size and np.all(np.abs(out[rows] - 1.0 / n) <= 1e-3 / n):
            return f"the row replaced by a uniform distribution (1/{n})"
    try:
        mref, _, _ = policy_reference(ctx.op, rec["inputs"], "mask", ctx.kwargs())
        with np.errstate(all="ignore"):
            close = np.abs(out[mask] - mref[mask]) <= 1e-2 * (np.abs(mref[mask]) + 1e-6) + 1e-6
        if close.size and np.all(close):
            return "as if the non-finite inputs were absent (nan=mask semantics)"
    except Exception:  # diagnostic only
        pass
    return f"replaced by finite values (e.g. {_fmt_value(float(vals.reshape(-1)[0]))})"


def _overflow_class(out: np.ndarray, ref: np.ndarray, fmax: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        right_inf = np.isinf(out) & (np.sign(out) == np.sign(ref))
        sat = np.isfinite(out) & (np.abs(out) == fmax) & (np.sign(out) == np.sign(ref))
    cls = np.full(out.shape, "garbage", dtype=object)
    cls[right_inf] = "inf"
    cls[np.isnan(out)] = "nan"
    cls[sat] = "saturate"
    return cls


_OVERFLOW_WORDS = {"inf": "inf (+-Inf)", "nan": "nan (NaN)", "saturate": "saturate (+-max)",
                   "garbage": "wrapped or garbage finite values"}

_CATEGORY_TEXT = {
    "nan-swallowed": "NaN swallowed",
    "inf-swallowed": "Inf swallowed",
    "inf-for-nan": "Inf where NaN is due",
    "nan-for-inf": "NaN where Inf is due",
    "wrong-sign-inf": "Inf of the wrong sign",
    "spurious-nan": "NaN where a finite value is due",
    "spurious-inf": "Inf where a finite value is due",
    "value": "finite values beyond tolerance",
}


@detector("exceptional_values",
          "where NaN/Inf were swallowed, misclassified or created, with the input position "
          "that carried them; the overflow behaviour observed against the declared one")
def exceptional_values(ctx: Context, evidence) -> dict:
    records = list(evidence.get("records") or [])
    policy = evidence.get("policy", ctx.claims.nan)
    fmt = ctx.op.output_format(ctx.dtype)
    fmax = float(fmt.max)
    limit = fmax + float(fmt.eps) * 2.0 ** fmt.emax / 2
    counts: dict[str, int] = {}
    examples: dict[str, str] = {}
    overflow_seen: dict[str, int] = {}
    overflow_failing = 0
    phrases: list[str] = []
    # 1. calls whose status was wrong (raise declared and values returned, or the reverse)
    for rec in records:
        f = rec.get("finding")
        if not f:
            continue
        where = _placed_text(rec["placed"], 2)
        if f == "returned":
            key, text = "returned", (f"declared nan=raise, but the kernel returned a result "
                                     f"for an input with {where}")
        elif f == "raised":
            key, text = "raised", (f"declared nan={policy}, but the kernel raised on an input "
                                   f"with {where} ({rec['error']})")
        else:
            key, text = f, f"the kernel {'crashed' if f == 'crashed' else 'hung'} on an input with {where}"
        counts[key] = counts.get(key, 0) + 1
        examples.setdefault(key, text)
    # 2. element positions
    first_idx = None
    for rec in records:
        cmp: Optional[Comparison] = rec.get("cmp")
        if cmp is None:
            continue
        out, ref = cmp.out, cmp.ref
        exp = np.asarray(cmp.env.get("expected", ref), dtype=np.float64)
        exp = np.broadcast_to(exp, out.shape)
        with np.errstate(invalid="ignore"):
            over = np.isfinite(ref) & (np.abs(ref) >= limit)
        if np.any(over):
            ocls = _overflow_class(out, ref, fmax)
            for c in ocls[over]:
                overflow_seen[c] = overflow_seen.get(c, 0) + 1
            overflow_failing += int(np.count_nonzero(over & ~cmp.ok))
        bad = ~cmp.ok & ~over
        if not np.any(bad):
            continue
        ec, oc = value_class(exp), value_class(out)
        cats = np.full(out.shape, "", dtype=object)
        cats[(ec == "nan") & (oc == "finite")] = "nan-swallowed"
        cats[np.isin(ec, ["+inf", "-inf"]) & (oc == "finite")] = "inf-swallowed"
        cats[(ec == "nan") & np.isin(oc, ["+inf", "-inf"])] = "inf-for-nan"
        cats[np.isin(ec, ["+inf", "-inf"]) & (oc == "nan")] = "nan-for-inf"
        cats[((ec == "+inf") & (oc == "-inf")) | ((ec == "-inf") & (oc == "+inf"))] = "wrong-sign-inf"
        cats[(ec == "finite") & (oc == "nan")] = "spurious-nan"
        cats[(ec == "finite") & np.isin(oc, ["+inf", "-inf"])] = "spurious-inf"
        cats[(ec == "finite") & (oc == "finite")] = "value"
        for cat in _CATEGORY_TEXT:
            m = bad & (cats == cat)
            n = int(np.count_nonzero(m))
            if not n:
                continue
            counts[cat] = counts.get(cat, 0) + n
            if cat in examples:
                continue
            idx = tuple(int(i) for i in np.argwhere(m)[0])
            if first_idx is None:
                first_idx = idx
            src = _sources(ctx.op, rec["placed"], idx)
            srctext = (f"input {_placed_text(src, 2)}" if src else
                       "no non-finite input" if not rec["placed"] else
                       f"no non-finite input reaches it (injected: {_placed_text(rec['placed'], 2)})")
            probe = rec["case"].extra.get("probe")
            what = (f"{srctext}; {_at(idx)} = {_fmt_value(out[idx])} where the oracle gives "
                    f"{_fmt_value(exp[idx])}")
            if cat in ("nan-swallowed", "inf-swallowed"):
                what += f" ({_replacement(ctx, rec, m)})"
            if cat in ("spurious-nan", "spurious-inf", "value") and probe in ("overflow", "finite"):
                what += f" [{rec['case'].family} inputs]"
            examples[cat] = what
    # 3. the headline
    sig: dict[str, Any] = {"declared": f"nan={policy}, overflow={ctx.claims.overflow}",
                           "counts": counts}
    for key in ("returned", "raised", "crashed", "timeout"):
        if key in examples:
            phrases.append(examples[key])
    for cat, text in _CATEGORY_TEXT.items():
        if cat in examples:
            phrases.append(f"{text}: {examples[cat]}" + (
                f" ({counts[cat]} outputs)" if counts[cat] > 1 else ""))
    if overflow_seen:
        total = sum(overflow_seen.values())
        seen = sorted(overflow_seen.items(), key=lambda kv: -kv[1])
        sig["overflow_declared"] = ctx.claims.overflow
        sig["overflow_observed"] = {k: v for k, v in seen}
        if overflow_failing:
            obs = ", ".join(f"{_OVERFLOW_WORDS[k]} at {v} of {total}" for k, v in seen)
            phrases.insert(0, f"overflow: declared {ctx.claims.overflow}, observed {obs} "
                              f"results beyond the {fmt.name} range")
    kind = next((k for k in ("returned", "raised", "crashed", "timeout") if k in counts), None)
    if kind is None and overflow_failing:
        kind = "overflow"
    if kind is None:
        kind = next((c for c in _CATEGORY_TEXT if c in counts), "value")
    sig["kind"] = kind
    if first_idx is not None:
        sig["index"] = list(first_idx)
    sig["summary"] = "; ".join(phrases) if phrases else ctx.contract.signature.summary
    return sig


# -- C-EXC-02: out-of-range indices -----------------------------------------------------------

BELOW = "below"
ABOVE = "above"


def oob_values(V: int) -> list[tuple[str, int]]:
    """(side, index) probes: below 0 and at or above V."""
    return [(BELOW, -1), (BELOW, -V), (BELOW, -V - 1), (BELOW, -(2 ** 31)),
            (ABOVE, V), (ABOVE, V + 1), (ABOVE, 2 ** 31 - 1)]


def classify_rows(table: np.ndarray, indices: np.ndarray, out) -> set:
    """The policies (clamp, zero, wrap) a returned result is consistent with, bit for
    bit; {"garbage"} when none (in-range rows wrong, values no policy gives, bad shape)."""
    if out is None:
        return {"garbage"}
    out = np.asarray(out)
    if out.shape != (indices.shape[0], table.shape[1]):
        return {"garbage"}
    got = out.astype(np.float64)
    tab = table.astype(np.float64)
    match = set()
    for pol in ("clamp", "zero", "wrap"):
        want = expected_rows(tab, indices, pol)
        if np.all((got == want) & (np.signbit(got) == np.signbit(want))
                  | (np.isnan(got) & np.isnan(want))):
            match.add(pol)
    return match or {"garbage"}


def _side_text(side: str, V: int) -> str:
    return "negative indices" if side == BELOW else "indices >= V"


def describe_side(obs: list[tuple[int, set]], side: str, V: int) -> str:
    """One phrase for a side: "clamp", or "wrap for -V <= i < 0 (python-style), raise below"."""
    common = set.intersection(*[set(s) for _, s in obs]) if obs else set()
    for pol in ("raise", "clamp", "wrap", "zero", "crash", "hang", "garbage"):
        if pol in common:
            return pol
    if side == BELOW:
        py = all(("wrap" in s) if i >= -V else (s == {"raise"}) for i, s in obs)
        if py:
            return "wrap for -V <= i < 0, raise below -V (python-style)"
    parts = []
    for i, s in obs:
        lab = next((p for p in ("raise", "clamp", "wrap", "zero", "crash", "hang", "garbage")
                    if p in s), "garbage")
        parts.append(f"{lab} at {i}")
    return "mixed: " + ", ".join(parts)


def oob_conforms(declared: str, labels: set) -> bool:
    if declared == "undefined":
        return not (labels & {"crash", "hang"})
    return declared in labels


@protocol("oob", params={"positions": (int, 2)}, provides=("free",),
          description="embedding calls with out-of-range indices (-1, -V, -V-1, -2**31; V, "
                      "V+1, 2**31-1), one value per call mixed with in-range indices, and an "
                      "in-range control call; each call's behaviour (raise, clamp, zero, wrap, "
                      "garbage, crash, hang) against the declared oob policy")
def oob(ctx: Context):
    t0 = time.perf_counter()
    index_policy = getattr(ctx.op, "index_policy", None)
    if index_policy is not None:
        # an op that states its own out-of-range semantics as a capability (bound,
        # with_index, expected); embedding's are the code below
        return _oob_by_capability(ctx, index_policy, t0)
    policy = ctx.claims.oob
    positions = int(ctx.param("positions", 2))
    shape = ctx.shapes()[0]
    family = ctx.protocol.families[0]
    base = ctx.inputs(shape, family, 0)
    table = base["table"]
    V = int(table.shape[0])
    case0 = ctx.case(shape, family, 0, probe="in-range")
    out = ctx.run(base, case0)
    ref0, x0 = ctx.reference(base)
    comps = [ctx.evaluate(case0, base, out, ref0, x=x0,
                          extra={"free": np.zeros_like(ref0)})]
    observations: list[dict] = []
    rng = ctx.rng("oob")
    for side, value in oob_values(V):
        idx = rng.integers(0, V, shape["N"]).astype(np.int64)
        pos = rng.choice(shape["N"], size=min(positions, shape["N"]), replace=False)
        idx[pos] = value
        inputs = {"table": table, "indices": idx}
        case = ctx.case(shape, family, 0, probe=f"index {value}")
        res = ctx.call(inputs)
        if res.status == "raised":
            labels = {"raise"}
        elif res.status == "crashed":
            labels = {"crash"}
        elif res.status == "timeout":
            labels = {"hang"}
        elif res.status == "bad-output":
            labels = {"garbage"}
        else:
            ctx.check_flags(res, case)
            labels = classify_rows(table, idx, res.out)
        ok = oob_conforms(policy, labels)
        cmp = None
        if res.ok and policy != "raise":
            got = np.asarray(res.out)
            if got.shape == (shape["N"], table.shape[1]):
                want = expected_rows(table.astype(np.float64), idx,
                                     "undefined" if policy == "undefined" else policy)
                free = np.zeros_like(want)
                if policy == "undefined":
                    free[:] = 1.0
                cmp = ctx.evaluate(case, inputs, got.astype(np.float64), want,
                                   extra={"free": free})
                comps.append(cmp)
                ok = ok and cmp.passed
        observations.append({"side": side, "index": value, "labels": sorted(labels),
                             "status": res.status, "error": res.describe() if not res.ok else "",
                             "ok": bool(ok), "case": case, "cmp": cmp})
    return _oob_verdict(ctx, observations, comps, V, case0, t0)


def _failure_labels(res) -> Optional[set]:
    """The behaviour of a call that returned nothing usable, or None if it returned."""
    return {"raised": {"raise"}, "crashed": {"crash"}, "timeout": {"hang"},
            "bad-output": {"garbage"}}.get(res.status)


def _oob_by_capability(ctx: Context, cap, t0: float):
    """``oob`` for an op with an ``index_policy``: ``cap.bound(inputs)`` is the size V the
    indices must stay below, ``cap.with_index(inputs, value, positions, rng)`` the inputs
    with that out-of-range value at a few positions, ``cap.expected(inputs, policy)`` the
    float64 reference under clamp, zero or wrap.  A returned result is classified by the
    policies whose reference it meets within the contract's tolerance."""
    from ..check.engine import KernelFailure
    policy = ctx.claims.oob
    positions = int(ctx.param("positions", 2))
    shape = ctx.shapes()[0]
    family = ctx.protocol.families[0]
    base = ctx.inputs(shape, family, 0)
    V = int(cap.bound(base))
    case0 = ctx.case(shape, family, 0, probe="in-range")
    out = ctx.run(base, case0)
    ref0, x0 = ctx.reference(base)
    comps = [ctx.evaluate(case0, base, out, ref0, x=x0, extra={"free": np.zeros_like(ref0)})]
    observations: list[dict] = []
    rng = ctx.rng("oob")
    for side, value in oob_values(V):
        inputs = cap.with_index(base, value, positions, rng)
        case = ctx.case(shape, family, 0, probe=f"index {value}")
        res = ctx.call(inputs)
        labels, cmp = _failure_labels(res), None
        if labels is None:
            ctx.check_flags(res, case)
            try:
                got = ctx.validate(res, case, inputs)
            except KernelFailure:  # a wrong shape or dtype: no policy gives it
                got = None
            by_policy = {}
            if got is not None:
                x = upcast(inputs)
                for pol in ("clamp", "zero", "wrap"):
                    want = np.asarray(cap.expected(inputs, pol), dtype=np.float64)
                    by_policy[pol] = ctx.evaluate(case, inputs, got, want, x=x,
                                                  extra={"free": np.zeros_like(want)})
            labels = {p for p, c in by_policy.items() if c.passed} or {"garbage"}
            cmp = by_policy.get(policy)
            if cmp is not None:
                comps.append(cmp)
        observations.append({"side": side, "index": value, "labels": sorted(labels),
                             "status": res.status, "error": res.describe() if not res.ok else "",
                             "ok": bool(oob_conforms(policy, labels)), "case": case, "cmp": cmp})
    return _oob_verdict(ctx, observations, comps, V, case0, t0)


def _oob_verdict(ctx: Context, observations: list, comps: list, V: int, case0, t0: float):
    """Pass, or a violation naming the behaviour observed on each side."""
    policy = ctx.claims.oob
    failing = [o for o in observations if not o["ok"]]
    control_bad = not comps[0].passed
    details = {"declared": policy, "V": V,
               "calls": [{"index": o["index"], "side": o["side"], "observed": o["labels"],
                          "conforms": o["ok"]} for o in observations]}
    if not failing and not control_bad:
        return ctx.passed(f"oob={policy}: all {len(observations)} out-of-range calls conform",
                          details=details, seconds=time.perf_counter() - t0)
    sig = ctx.run_detector({"observations": observations, "V": V, "policy": policy,
                            "control": comps[0]})
    headline = sig.pop("summary", None) or ctx.contract.signature.summary
    bad_cmp = next((o["cmp"] for o in failing if o["cmp"] is not None and not o["cmp"].passed),
                   comps[0] if control_bad else None)
    case = failing[0]["case"] if failing else case0
    v = ctx.violation(bad_cmp, message=headline, quantities=sig, case=case)
    return ctx.violated(v, signature=sig, details=details, seconds=time.perf_counter() - t0)


@detector("oob_behaviour",
          "the behaviour observed for indices below 0 and at or above V against the declared "
          "policy, per index")
def oob_behaviour(ctx: Context, evidence) -> dict:
    obs = list(evidence.get("observations") or [])
    V = int(evidence.get("V", 0))
    policy = evidence.get("policy", ctx.claims.oob)
    per_index = {str(o["index"]): "/".join(o["labels"]) for o in obs}
    sides = {}
    for side in (BELOW, ABOVE):
        items = [(o["index"], set(o["labels"])) for o in obs if o["side"] == side]
        sides[side] = describe_side(items, side, V)
    wrong = [side for side in (BELOW, ABOVE)
             if any(not o["ok"] for o in obs if o["side"] == side)]
    parts = []
    for side in wrong or (BELOW, ABOVE):
        parts.append(f"{sides[side]} on {_side_text(side, V)}")
    control = evidence.get("control")
    summary = f"declared {policy}, observed " + "; ".join(parts)
    if control is not None and not control.passed:
        summary += "; in-range indices give wrong rows"
    return {"declared": policy, "below": sides[BELOW], "above": sides[ABOVE],
            "per_index": per_index, "V": V, "summary": summary}
