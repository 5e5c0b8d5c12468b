"""The precision family (C-PRC-01..04): protocols and signature detectors.

Protocols
    ``subnormal_probe``  (C-PRC-03) crafted inputs per op: subnormal inputs whose
                         results are normal where the op allows it ("inputs"), and
                         normal inputs whose results are subnormal ("outputs").
    ``conversion_probe`` (C-PRC-04, cast) the families plus exact ties and values at
                         the target's overflow threshold, where rounding modes differ.

Detectors
    ``precision_fingerprint``  (C-PRC-01, C-PRC-04) the recipe the kernel ran:
                               operand format x accumulator format and effective
                               accumulator bits (matmul, sum: crafted probes, see
                               :mod:`.fingerprint`); for other ops, the operand
                               format whose emulation explains the error and the
                               accumulator precision the error corresponds to.
    ``unstable_formulation``   (C-PRC-02) pass rate per input family and the
                               formulation that fails that way.
    ``subnormal_flush``        (C-PRC-03) where subnormals were flushed, with counts.
    ``rounding_mode``          (C-PRC-04, cast) which rounding mode the conversion used.
"""
from __future__ import annotations

import math
import time
from collections import OrderedDict
from typing import Optional

import numpy as np

from ..check.engine import Comparison, Context
from ..formats import get_format, is_subnormal
from ..language.registry import detector, protocol
from ..ops import FAMILY_DESCRIPTIONS
from ..ops.families import get_family
from .common import compare_cases, verdict_from
from .fingerprint import (fingerprint_attention, fingerprint_matmul, fingerprint_sum,
                          identify_rounding, nearest_accumulator, rounded, short)


# -- helpers --------------------------------------------------------------------------------

def _caller(ctx: Context):
    """``call(*arrays)`` -> the kernel's output as an array, or None when it fails."""
    def call(*arrays):
        res = ctx.call(dict(zip(ctx.op.inputs, arrays)))
        if not res.ok or res.out is None:
            return None
        return np.asarray(res.out)
    return call


def _comparisons(evidence) -> list[Comparison]:
    return list(evidence.get("comparisons") or [])


def _narrower(fmt_a: str, fmt_b: str) -> bool:
    """fmt_a holds fewer significand bits or less range than fmt_b."""
    a, b = get_format(fmt_a), get_format(fmt_b)
    return a.precision < b.precision or a.max < b.max


def _gross_share(comps: list[Comparison]) -> float:
    """Share of the failing elements whose error is at least half the result itself:
    not rounding, but wrong or missing results."""
    bad = total = 0
    for c in comps:
        if c.passed:
            continue
        with np.errstate(invalid="ignore"):
            err = c.error()
            big = ~c.ok & ~(err < 0.5 * np.abs(c.ref))
        bad += int(np.count_nonzero(big))
        total += c.mismatched
    return bad / total if total else 0.0


def _required_precision(ctx: Context, comps: list[Comparison]) -> Optional[float]:
    """The accumulator precision (bits) the observed error corresponds to: the
    tolerance scales like u, so a kernel that needs the tolerance multiplied by r
    behaves like an accumulator with u * r, i.e. log2(r) fewer bits."""
    ratios = []
    for c in comps:
        if c.tol is None:
            continue
        err = c.error()
        tol = np.broadcast_to(c.tol, err.shape)
        ok = np.isfinite(err) & np.isfinite(tol) & (tol > 0)
        if ok.any():
            ratios.append(float(np.max(err[ok] / tol[ok])))
    if not ratios:
        return None
    r = max(ratios)
    if r <= 1:
        return float(ctx.claims.accumulate.precision)
    return float(ctx.claims.accumulate.precision) - math.log2(r)


def dec_bits_declared(ctx: Context) -> int:
    return int(ctx.claims.accumulate.precision)


def _attention_emulation(x: dict, fmt: str, round_p: bool, causal: bool) -> np.ndarray:
    from ..ops._math import softmax
    from ..ops.attention import causal_mask
    q, k, v = (rounded(x[n], fmt) for n in ("q", "k", "v"))
    with np.errstate(all="ignore"):
        s = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
        if causal:
            s = np.where(causal_mask(q.shape[-2], k.shape[-2]), s, -np.inf)
        p = softmax(s)
        if round_p:
            p = rounded(p, fmt)
        return np.matmul(p, v)


def _substitution(ctx: Context, comps: list[Comparison]) -> Optional[dict]:
    """Which narrower operand format's emulation explains the kernel's error:
    the residual |out - emulation| as a share of |out - oracle|."""
    dtype = ctx.dtype.name
    cands = [f for f in ("tfloat32", "float16", "bfloat16") if _narrower(f, dtype)]
    if not cands or not comps:
        return None
    kw = ctx.kwargs()
    best = None
    for c in comps[:2]:
        x = {k: v for k, v in c.env.items() if k in ctx.op.inputs}
        err = c.out - c.ref
        fin = np.isfinite(err)
        base = float(np.sqrt(np.mean(err[fin] ** 2))) if fin.any() else 0.0
        if base == 0.0:
            continue
        for f in cands:
            variants = [("operands", False)]
            if ctx.op.name == "attention":
                variants.append(("operands and probabilities", True))
            for label, rp in variants:
                with np.errstate(all="ignore"):
                    if ctx.op.name == "attention":
                        emul = _attention_emulation(x, f, rp, bool(kw.get("causal", False)))
                    else:
                        xr = {k: (rounded(v, f) if np.asarray(v).dtype.kind == "f" else v)
                              for k, v in x.items()}
                        emul = ctx.op.oracle(xr, **kw)
                    d = c.out - emul
                ok = fin & np.isfinite(d)
                if not ok.any():
                    continue
                resid = float(np.sqrt(np.mean(d[ok] ** 2))) / base
                if best is None or resid < best["residual"]:
                    best = {"format": f, "what": label, "residual": resid}
    return best


# -- precision fingerprint (C-PRC-01 / C-PRC-04) ---------------------------------------------

@detector("precision_fingerprint",
          "the recipe the kernel ran: operand format x accumulator format, effective "
          "accumulator bits (order-independent probes for matmul, sum, linear_gelu and "
          "attention's p @ v; an operand-rounding emulation and the error-equivalent bits "
          "otherwise)")
def precision_fingerprint(ctx: Context, evidence) -> dict:
    comps = _comparisons(evidence)
    cls = ctx.contract.cls
    dtype = ctx.dtype.name
    declared = ctx.claims.accumulate.name
    op = ctx.op.name
    out: dict = {"declared_accumulator": declared, "declared_operands": dtype}
    req = _required_precision(ctx, [c for c in comps if not c.passed])
    if req is not None:
        req = round(req, 1)
        out["error_equivalent_bits"] = req
    gross = _gross_share(comps)
    fp = None
    if gross >= 0.5:
        pass  # wrong results, not rounding: no recipe to fingerprint
    elif op == "matmul":
        fp = fingerprint_matmul(_caller(ctx), dtype)
    elif op == "sum":
        fp = fingerprint_sum(_caller(ctx), dtype)
    elif op == "linear_gelu":
        call = _caller(ctx)
        fp = fingerprint_matmul(
            lambda a, b: call(a, b, np.zeros(b.shape[-1], dtype=b.dtype)), dtype,
            positive=True, growth=())
    elif op == "attention":
        fp = fingerprint_attention(_caller(ctx), dtype)
    if fp is not None:
        if fp.accumulator_bits is None and req is not None and fp.confidence >= 0.9:
            fp.accumulator_bits = req if req < ctx.claims.accumulate.precision else None
        out.update(fp.as_dict())
        operand, acc, bits = fp.operand_format, fp.accumulator_format, fp.accumulator_bits
        if (op == "attention" and gross < 0.5 and not (operand and _narrower(operand, dtype))
                and (cls == "C-PRC-04" or fp.confidence < 0.9)):
            # the p @ v probe cannot see q and k: an emulation can
            sub = _substitution(ctx, [c for c in comps if not c.passed])
            if sub is not None:
                out["substitution"] = {k: (round(v, 3) if isinstance(v, float) else v)
                                       for k, v in sub.items()}
                if sub["residual"] < 0.5:
                    operand = sub["format"]
                    out["recipe"] = (f"{sub['what']} rounded to {short(operand)} "
                                     f"(the emulation leaves {sub['residual']:.0%} of the error)")
                    out["operand_format"] = operand
    else:
        sub = None if gross >= 0.5 else _substitution(ctx, [c for c in comps if not c.passed])
        operand, acc, bits = dtype, None, None
        if sub is not None:
            out["substitution"] = {k: (round(v, 3) if isinstance(v, float) else v)
                                   for k, v in sub.items()}
        if sub is not None and sub["residual"] < 0.5:
            operand = sub["format"]
            acc = declared
            out["recipe"] = (f"{sub['what']} rounded to {short(operand)} "
                             f"(the emulation leaves {sub['residual']:.0%} of the error)")
        elif req is not None:
            bits = round(req, 1)
            acc = nearest_accumulator(req)
            if acc == "float32" and req < dec_bits_declared(ctx) - 2:
                out["recipe"] = (f"error of a ~{bits:g}-bit accumulator (between fp16 and fp32: "
                                 "a wide first stage with narrower partials?)")
                acc = None
            else:
                out["recipe"] = f"error of a ~{bits:g}-bit accumulator ({short(acc)}-like)"
        out.update({"operand_format": operand, "accumulator_format": acc,
                    "accumulator_bits": bits})
    recipe = out.get("recipe", "")
    dec_bits = ctx.claims.accumulate.precision
    narrow_acc = acc is not None and _narrower(acc, declared)
    narrow_op = operand is not None and _narrower(operand, dtype)
    bits_txt = f" (~{bits:g} effective bits)" if bits is not None else ""
    unexplained = fp is not None and fp.confidence < 0.9
    if gross >= 0.5:
        summary = ("the error is as large as the results themselves: no rounding recipe "
                   "explains it (wrong or incomplete results)")
    elif unexplained:
        summary = f"{recipe}" + (f"; the error corresponds to a ~{req:g}-bit accumulator"
                                 if req is not None else "")
    elif cls == "C-PRC-04" and narrow_op:
        summary = (f"operands rounded to {short(operand)} before the product, not kept in "
                   f"{short(dtype)}: {recipe}")
    elif narrow_acc:
        verb = "intermediates rounded to" if cls == "C-PRC-04" else "accumulates like"
        summary = (f"{verb} {short(acc)}{bits_txt}, not the declared {short(declared)} "
                   f"accumulator: {recipe}")
    elif narrow_op:
        summary = (f"the accumulator is {short(declared)} as declared, but the kernel ran "
                   f"{recipe}: an undeclared operand substitution (C-PRC-04) costs the "
                   f"precision")
        if cls == "C-PRC-01":
            out["refined_code"] = "operand-substitution"
    elif fp is None and req is not None and req < dec_bits - 2:
        summary = (f"the error corresponds to a ~{req:g}-bit accumulator, narrower than "
                   f"the declared {short(declared)} ({dec_bits} bits): partial results are "
                   f"kept in a narrower format somewhere")
    else:
        summary = (f"error above the {short(declared)}-accumulation bound; "
                   f"fingerprint: {recipe or 'not identified'}")
    out["summary"] = summary
    return out


# -- C-PRC-02: unstable formulations ---------------------------------------------------------

def _family_table(comps: list[Comparison]) -> "OrderedDict[str, list]":
    fams: "OrderedDict[str, list]" = OrderedDict()
    for c in comps:
        row = fams.setdefault(c.case.family, [0, 0])
        row[0] += int(c.passed)
        row[1] += 1
    return fams


def _describe_family(name: str) -> str:
    d = FAMILY_DESCRIPTIONS.get(name, "")
    return f"'{name}' ({d})" if d else f"'{name}'"


def _kappa_exponent(ctx: Context, comps: list[Comparison]) -> Optional[float]:
    """log(error / (u mag)) / log(kappa) on the failing layernorm cases: about 1 for a
    stable formulation (centring error ~ kappa u), about 2 for E[x^2]-E[x]^2."""
    u = ctx.claims.accumulate.u
    vals = []
    for c in comps:
        k = c.env.get("kappa")
        mag = c.env.get("mag")
        if k is None or mag is None:
            continue
        err = c.error()
        kk = np.broadcast_to(k, err.shape)
        mm = np.broadcast_to(mag, err.shape)
        ok = np.isfinite(err) & (err > 0) & (kk > 10) & (mm > 0)
        if ok.sum() < 4:
            continue
        rel = err[ok] / (u * mm[ok])
        vals.append(float(np.median(np.log(rel) / np.log(kk[ok]))))
    return float(np.median(vals)) if vals else None


@detector("unstable_formulation",
          "per input family pass rate and the unstable formulation that fails that way")
def unstable_formulation(ctx: Context, evidence) -> dict:
    comps = _comparisons(evidence)
    fams = _family_table(comps)
    failing = [f for f, (p, t) in fams.items() if p < t]
    passing = [f for f, (p, t) in fams.items() if p == t]
    bad = [c for c in comps if not c.passed]
    nonfinite = 0
    for c in bad:
        nonfinite += int(np.count_nonzero(~np.isfinite(c.out) & np.isfinite(c.ref)))
    op = ctx.op.name
    stress = [f for f in failing if f in ("offset", "large", "logits")]
    suspected = ""
    extra: dict = {}
    if op in ("softmax", "attention"):
        where = "softmax inside attention" if op == "attention" else "softmax"
        if nonfinite:
            suspected = (f"exp without max subtraction in {where}: exp overflowed "
                         f"({nonfinite} outputs NaN/Inf where the oracle is finite)")
        elif stress:
            suspected = (f"exp without (exact) max subtraction in {where}: large exp "
                         "arguments lose precision")
    elif op == "layernorm":
        if "offset" in failing:
            expo = _kappa_exponent(ctx, [c for c in bad if c.case.family == "offset"])
            if expo is not None:
                extra["kappa_exponent"] = round(expo, 2)
            if nonfinite:
                suspected = ("variance as E[x²]−E[x]²: cancellation made the variance "
                             f"negative or zero ({nonfinite} outputs NaN/Inf)")
            else:
                suspected = "variance as E[x²]−E[x]² (one pass: catastrophic cancellation)"
                if expo is not None:
                    suspected += f"; error grows like kappa^{expo:.1f} (stable: kappa^1)"
        elif "large" in failing:
            suspected = "squares overflow: x² summed without rescaling"
    if not suspected:
        suspected = ("inaccurate on every family: not a stability signature"
                     if not passing else "a formulation that is unstable on "
                     + ", ".join(repr(f) for f in failing))
    rate = {f: f"{p}/{t}" for f, (p, t) in fams.items()}
    fail_txt = ", ".join(f"{_describe_family(f)} ({fams[f][0]} of {fams[f][1]} cases pass)"
                         for f in failing)
    pass_txt = ", ".join(f"'{f}'" for f in passing)
    summary = f"fails on family {fail_txt}"
    if passing:
        summary += f" while {pass_txt} pass{'es' if len(passing) == 1 else ''}"
    summary += f"; suspected: {suspected}"
    out = {"family_pass_rate": rate, "failing_families": failing, "passing_families": passing,
           "suspected_formulation": suspected, "nonfinite_outputs": nonfinite,
           "summary": summary}
    out.update(extra)
    return out


# -- C-PRC-03: subnormals ----------------------------------------------------------------------

def _signs(rng, shape):
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0)


def _store(values, storage):
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return np.asarray(values, dtype=np.float64).astype(storage)


def subnormal_inputs(op, shape: dict, fmt, kind: str, rng) -> Optional[dict]:
    """Crafted inputs for the subnormal probes (None: the probe says nothing for this op/format).

    ``kind == "inputs"``: subnormal inputs, whose results are normal numbers where the
    op allows it (a flush of the inputs then shows as a zero where a normal number
    belongs).  ``kind == "outputs"``: normal inputs whose exact results are subnormal."""
    fmt = get_format(fmt)
    tiny = fmt.tiny
    sub = get_family("subnormal")
    name = op.name
    shapes = op.input_shapes(shape)
    if name == "matmul":
        sa, sb = shapes["a"], shapes["b"]
        if kind == "inputs":
            a = sub(sa, rng, fmt)
            b = rng.uniform(1.0, 2.0, sb) * _signs(rng, sb) * 2.0 ** (fmt.precision - 1)
        else:
            a = rng.uniform(1.0, 2.0, sa) * _signs(rng, sa) * tiny * 2.0 ** 4
            b = rng.uniform(1.0, 2.0, sb) * _signs(rng, sb) * 2.0 ** -9
        return {"a": _store(a, fmt.dtype), "b": _store(b, fmt.dtype)}
    if name == "sum":
        s = shapes["x"]
        if kind == "inputs":
            row_sign = _signs(rng, (s[0], 1))
            x = rng.uniform(0.125, 1.0, s) * tiny * row_sign
        else:
            n = s[1] - s[1] % 2
            if n < 2:
                return None
            q = fmt.smallest_subnormal
            t = np.round(rng.uniform(1.5, 2.0, (s[0], n // 2)) * tiny / q) * q
            dmax = max(1, int(tiny / q / n))
            d = rng.integers(1, dmax + 1, (s[0], n // 2)) * q
            sign = _signs(rng, (s[0], n // 2))
            pairs = np.stack([t * sign, -(t - d) * sign], axis=-1).reshape(s[0], n)
            x = np.zeros(s)
            for r in range(s[0]):
                x[r, :n] = pairs[r, rng.permutation(n)]
        return {"x": _store(x, fmt.dtype)}
    if name == "gelu":
        s = shapes["x"]
        x = sub(s, rng, fmt) if kind == "inputs" else \
            rng.uniform(1.0, 1.99, s) * tiny * _signs(rng, s)
        return {"x": _store(x, fmt.dtype)}
    if name == "softmax":
        if kind == "inputs":
            return None  # exp of a subnormal logit is 1 either way: flushing it is invisible
        s = shapes["x"]
        # logits this far below the row maximum give probabilities in the subnormal range
        lo, hi = -np.log(fmt.tiny), -np.log(fmt.smallest_subnormal)
        x = -(lo + rng.uniform(0.1, 0.8, s) * (hi - lo))
        x[..., 0] = 0.0  # the row maximum: its probability is about 1
        return {"x": _store(x, fmt.dtype)}
    if name == "cast":
        s = shapes["x"]
        f32 = get_format("float32")
        if kind == "inputs" and fmt.emin != f32.emin:
            return None  # float32 subnormals round to zero in this format anyway
        x = sub(s, rng, fmt)
        return {"x": _store(x, np.float32)}
    return None


@protocol("subnormal_probe",
          params={"probes": ((list, tuple), ("inputs", "outputs")), "kwargs": (dict, {})},
          description="crafted subnormal inputs (results normal where possible) and normal "
                      "inputs with subnormal results, per op")
def subnormal_probe(ctx: Context):
    t0 = time.perf_counter()
    comps = []
    for shape in ctx.shapes():
        for kind in ctx.param("probes"):
            for trial in range(ctx.protocol.trials):
                rng = ctx.rng(ctx.op.describe_shape(shape), "subnormal", kind, trial)
                inputs = subnormal_inputs(ctx.op, shape, ctx.dtype, kind, rng)
                if inputs is None:
                    continue
                case = ctx.case(shape, f"subnormal-{kind}", trial)
                ref, x = ctx.reference(inputs)
                out = ctx.run(inputs, case)
                comps.append(ctx.evaluate(case, inputs, out, ref, x=x))
    if not comps:
        return ctx.skipped(f"no subnormal probe applies to {ctx.op.name} at {ctx.dtype.name}")
    return verdict_from(ctx, comps, t0)


@detector("subnormal_flush",
          "where subnormals were flushed to zero: the inputs (DAZ) or the outputs (FTZ), "
          "with counts")
def subnormal_flush(ctx: Context, evidence) -> dict:
    comps = _comparisons(evidence)
    out_fmt = ctx.op.output_format(ctx.dtype)
    kw = ctx.kwargs()
    ftz_total = ftz_flushed = nonfinite = 0
    daz_fail = daz_match = daz_normal_zero = 0
    in_fail = 0
    for c in comps:
        o, r = c.out, c.ref
        nonfinite += int(np.count_nonzero(~np.isfinite(o) & np.isfinite(r)))
        if c.case.family == "subnormal-outputs":
            subref = is_subnormal(r, out_fmt)
            ftz_total += int(np.count_nonzero(subref))
            ftz_flushed += int(np.count_nonzero(subref & (o == 0)))
        elif c.case.family == "subnormal-inputs":
            failing = ~c.ok
            in_fail += int(np.count_nonzero(failing))
            x = {k: v for k, v in c.env.items() if k in ctx.op.inputs}
            zeroed = {}
            for k, v in x.items():
                storage = get_format(ctx.op.input_format(k, ctx.dtype))
                zeroed[k] = np.where(is_subnormal(v, storage), 0.0, v)
            with np.errstate(all="ignore"):
                daz_ref = ctx.op.oracle(zeroed, **kw)
            tol = np.broadcast_to(c.tol if c.tol is not None else 0.0, o.shape)
            with np.errstate(invalid="ignore"):
                match = np.abs(o - daz_ref) <= np.maximum(tol, 0.0)
            daz_fail += int(np.count_nonzero(failing))
            daz_match += int(np.count_nonzero(failing & match))
            daz_normal_zero += int(np.count_nonzero(failing & (np.abs(r) >= out_fmt.tiny)
                                                    & (o == 0)))
    outputs_flushed = ftz_flushed > 0 and ftz_flushed >= 0.5 * ftz_total
    inputs_flushed = daz_normal_zero > 0 and daz_match >= 0.9 * daz_fail
    inputs_unclear = (not inputs_flushed) and daz_fail > 0 and daz_match >= 0.9 * daz_fail
    parts = []
    if inputs_flushed:
        parts.append(f"subnormal inputs treated as zero (DAZ): {daz_match} of {daz_fail} "
                     f"failing outputs equal the oracle with subnormal inputs zeroed, "
                     f"{daz_normal_zero} of them zeros where a normal number belongs")
    if outputs_flushed:
        parts.append(f"subnormal outputs flushed to zero (FTZ): {ftz_flushed} of {ftz_total} "
                     f"subnormal results are 0")
    if inputs_unclear and not outputs_flushed:
        parts.append(f"subnormal inputs or their subnormal results flushed to zero: "
                     f"{daz_match} of {daz_fail} failing outputs equal the oracle with "
                     f"subnormal inputs zeroed")
    if nonfinite:
        parts.append(f"{nonfinite} outputs are NaN/Inf where the oracle is finite (operands "
                     f"overflowing a narrower format?)")
    if not parts:
        parts.append("subnormal results are wrong but not flushed to zero")
    if inputs_flushed and not outputs_flushed and ftz_total:
        parts.append("subnormal outputs of normal inputs are kept")
    if outputs_flushed and not inputs_flushed and not inputs_unclear and daz_fail == 0 \
            and any(c.case.family == "subnormal-inputs" for c in comps):
        parts.append("subnormal inputs are honoured")
    where = ("inputs and outputs" if inputs_flushed and outputs_flushed else
             "inputs" if inputs_flushed else "outputs" if outputs_flushed else
             "inputs or outputs" if inputs_unclear else "none")
    return {"flushed": where, "flushed_outputs": ftz_flushed, "subnormal_outputs": ftz_total,
            "daz_matches": daz_match, "failing_with_subnormal_inputs": daz_fail,
            "normal_results_zeroed": daz_normal_zero, "nonfinite_outputs": nonfinite,
            "summary": "; ".join(parts)}


# -- C-PRC-04 cast: rounding mode ---------------------------------------------------------------

def conversion_inputs(shape: dict, fmt, kind: str, rng) -> dict:
    """float32 inputs for a conversion to ``fmt`` where rounding modes disagree.

    ``ties``: values exactly halfway between two neighbours in ``fmt`` (normal and
    subnormal), where nearest-even and nearest-away differ; ``overflow-edge``: values
    at and just beyond the largest finite number, where nearest rounding overflows to
    inf and truncation saturates."""
    fmt = get_format(fmt)
    R, N = int(shape["R"]), int(shape["N"])
    n = R * N
    p = fmt.precision
    sign = _signs(rng, n)
    if kind == "ties":
        e = rng.integers(fmt.emin, min(fmt.emax, 60) + 1, n).astype(np.float64)
        m = rng.integers(2 ** (p - 1), 2 ** p, n).astype(np.float64)
        normal = (m + 0.5) * 2.0 ** (e - p + 1)
        k = rng.integers(0, 2 ** (p - 1), n).astype(np.float64)
        subn = (k + 0.5) * fmt.smallest_subnormal
        x = np.where(rng.random(n) < 0.8, normal, subn)
    elif kind == "overflow-edge":
        top = 2.0 ** (fmt.emax - p + 1)  # spacing at the largest binade
        steps = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0, 1.5], n)
        x = fmt.max + steps * top
    else:
        raise ValueError(f"unknown conversion probe {kind!r}")
    return {"x": _store((x * sign).reshape(R, N), np.float32)}


@protocol("conversion_probe",
          params={"probes": ((list, tuple), ("ties", "overflow-edge")), "kwargs": (dict, {})},
          description="the families, plus exact ties and values at the overflow threshold of "
                      "the target format (cast)")
def conversion_probe(ctx: Context):
    t0 = time.perf_counter()
    cases = list(ctx.iter_cases())
    for shape in ctx.shapes():
        for kind in ctx.param("probes"):
            for trial in range(ctx.protocol.trials):
                rng = ctx.rng(ctx.op.describe_shape(shape), "conversion", kind, trial)
                cases.append((ctx.case(shape, kind, trial),
                              conversion_inputs(shape, ctx.dtype, kind, rng)))
    comps, skipped = compare_cases(ctx, cases)
    return verdict_from(ctx, comps, t0, skipped=skipped)


@detector("rounding_mode",
          "the rounding mode the conversion matches: nearest-even, nearest-away, toward zero, "
          "toward +inf, toward -inf")
def rounding_mode(ctx: Context, evidence) -> dict:
    comps = _comparisons(evidence)
    fmt = ctx.op.output_format(ctx.dtype)
    xs, outs = [], []
    for c in comps:
        x = c.env.get("x")
        if x is None:
            continue
        fin = np.isfinite(np.asarray(x))
        xs.append(np.asarray(x)[fin])
        outs.append(c.out[fin])
    if not xs:
        return {"summary": "no conversion inputs to compare"}
    info = identify_rounding(np.concatenate(xs), np.concatenate(outs), fmt)
    m = info["rounding_mode"]
    share = info["rounding_matches"][m]
    rne = info["rounding_matches"]["rne"]
    if share >= 0.99 and m != "rne":
        summary = (f"conversion to {short(fmt)} matches {info['rounding_mode_name']} on "
                   f"{share:.0%} of {info['informative_elements']} inexact elements, not "
                   f"round-to-nearest-even ({rne:.0%})")
    elif share >= 0.99:
        summary = "conversion rounds to nearest even; the mismatch is elsewhere"
    else:
        summary = (f"no IEEE rounding mode explains the conversion (closest: "
                   f"{info['rounding_mode_name']}, {share:.0%}; nearest-even {rne:.0%})")
    info["summary"] = summary
    return info


__all__ = ["precision_fingerprint", "unstable_formulation", "subnormal_probe", "subnormal_flush",
           "rounding_mode", "conversion_probe", "conversion_inputs", "subnormal_inputs"]
