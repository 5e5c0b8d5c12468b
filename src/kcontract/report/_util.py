"""Helpers shared by the renderers: number formatting, safe lookups, case tables.

Every renderer reads the run's JSON (schema ``kcontract.run/1``) and must survive
missing keys: a run may come from an older version, a partial protocol or a
hand-edited file.  Numbers arrive as floats or as the strings ``"nan"``,
``"inf"``, ``"-inf"`` (see :func:`kcontract.check.verdict.jsonable`).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Optional

VERDICTS = ("pass", "violation", "error", "skipped")
MARK = {"pass": "✓", "violation": "✗", "error": "!", "skipped": "–"}


def as_float(x: Any) -> Optional[float]:
    """A float, or None for anything that is not a number (None, dicts, junk)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def fmt_num(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, str) and as_float(x) is None:
        return x
    f = as_float(x)
    if f is None:
        return str(x)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f == 0:
        return "0"
    if f == int(f) and abs(f) < 1e6:
        return str(int(f))
    if abs(f) >= 1e4 or abs(f) < 1e-3:
        return f"{f:.3e}"
    return f"{f:.6g}"


def fmt_value(val: Any, limit: int = 160) -> str:
    """A signature quantity as short text (lists and dicts abbreviated)."""
    if isinstance(val, bool):
        return "true" if val else "false"
    if isinstance(val, float) or (isinstance(val, str) and as_float(val) is not None
                                  and val.strip().lower() in ("nan", "inf", "-inf")):
        s = fmt_num(val)
    elif isinstance(val, (list, tuple)):
        head = ", ".join(fmt_value(x, 40) for x in list(val)[:6])
        s = f"[{head}{', …' if len(val) > 6 else ''}]"
    elif isinstance(val, Mapping):
        head = ", ".join(f"{k}: {fmt_value(x, 40)}" for k, x in list(val.items())[:6])
        s = "{" + head + (", …" if len(val) > 6 else "") + "}"
    else:
        s = str(val)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def shape_text(shape: Any) -> str:
    if isinstance(shape, Mapping):
        return ",".join(f"{k}={v}" for k, v in shape.items())
    return str(shape) if shape is not None else ""


def case_text(case: Any) -> str:
    if not isinstance(case, Mapping):
        return str(case or "")
    extra = "".join(f" {k}={v}" for k, v in (case.get("extra") or {}).items())
    return (f"{shape_text(case.get('shape'))} dtype={case.get('dtype')} "
            f"family={case.get('family')} seed={case.get('seed')}{extra}").strip()


def results(run: Mapping[str, Any]) -> list[dict]:
    return [r for r in (run.get("results") or []) if isinstance(r, Mapping)]


def counts(run: Mapping[str, Any]) -> dict[str, int]:
    out = {v: 0 for v in VERDICTS}
    for r in results(run):
        v = str(r.get("verdict", "error"))
        out[v] = out.get(v, 0) + 1
    return out


def nothing_checked(run: Mapping[str, Any]) -> Optional[str]:
    """Why nothing was checked in this run (every contract skipped), or None."""
    from ..check.verdict import nothing_checked as rule
    return rule((str(r.get("verdict", "")), str(r.get("message") or "")) for r in results(run))


def summary_text(run: Mapping[str, Any]) -> str:
    """``"7 pass, 2 skipped"``: the run's verdict counts, in the order of VERDICTS."""
    return ", ".join(f"{n} {k}" for k, n in counts(run).items() if n)


def ratio(measured: Any, allowed: Any) -> Optional[float]:
    """measured / allowed, or None where that says nothing (a non-finite measurement,
    no positive allowance)."""
    m, a = as_float(measured), as_float(allowed)
    if m is None or a is None or not math.isfinite(m) or a <= 0:
        return None
    return m / a


def overall(run: Mapping[str, Any]) -> str:
    """The run's verdict (recomputed when the file does not carry one)."""
    if run.get("verdict"):
        return str(run["verdict"])
    c = counts(run)
    if c.get("error"):
        return "error"
    return "violation" if c.get("violation") else "conformant"


def class_name(cls: str) -> str:
    from ..classes.taxonomy import CLASSES
    c = CLASSES.get(str(cls))
    return c.name if c else ""


def family_of(cls: str) -> str:
    return str(cls)[:5] if str(cls).startswith("C-") else ""


def signature_code(r: Mapping[str, Any]) -> str:
    sig = r.get("signature") or {}
    v = r.get("violation") or {}
    return str((sig.get("code") if isinstance(sig, Mapping) else None) or v.get("code") or "")


def signature_quantities(r: Mapping[str, Any]) -> dict:
    sig = r.get("signature") or {}
    if not isinstance(sig, Mapping):
        return {}
    out = {k: v for k, v in sig.items() if k not in ("code", "details", "summary")}
    rec = out.get("recovered_recipe")
    if isinstance(rec, Mapping):  # the recipe's own table shows the fields (see recipe_rows)
        out["recovered_recipe"] = rec.get("summary") or rec.get("error") or "-"
    return out


def recipe_of(r: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    """The recipe a failing C-PRC-01/04 recovered (its signature's ``recovered_recipe``),
    or None when it recovered none (no recovery, or the error saying why)."""
    sig = r.get("signature") or {}
    rec = sig.get("recovered_recipe") if isinstance(sig, Mapping) else None
    return rec if isinstance(rec, Mapping) and rec.get("summary") else None


def recipe_rows(r: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(field, value, confidence, evidence) of the recipe a failing C-PRC-01/04 recovered
    (signature ``recovered_recipe``); empty when there is none."""
    from ..fingerprint.recover import STATED_FIELDS
    rec = recipe_of(r)
    if rec is None:
        return []
    ev = rec.get("evidence") if isinstance(rec.get("evidence"), Mapping) else {}
    rows = []
    for name in STATED_FIELDS:
        if name not in rec:
            continue
        conf = as_float(rec.get(f"{name}_confidence"))
        rows.append((name, "-" if rec[name] is None else str(rec[name]),
                     "" if conf is None else f"{conf:.0%}", str(ev.get(name, ""))))
    return rows


def case_rows(r: Mapping[str, Any]) -> list[dict]:
    """The per-case rows a protocol left in ``details["cases"]`` (maybe none)."""
    details = r.get("details") or {}
    rows = details.get("cases") if isinstance(details, Mapping) else None
    if not isinstance(rows, list):
        return []
    return [row for row in rows if isinstance(row, Mapping)]


def reduction_length(op: str, shape: Any) -> Optional[int]:
    """The op's reduction length at ``shape`` (None when unknown or not a reduction)."""
    if not isinstance(shape, Mapping):
        return None
    try:
        from ..ops import get_op
        o = get_op(op)
        if not o.reduction:
            return None
        return int(o.reduction_length(o.full_shape(shape)))
    except Exception:
        return None


def first(mapping: Mapping[str, Any], keys: Iterable[str]) -> Any:
    for k in keys:
        if k in mapping and mapping[k] is not None:
            return mapping[k]
    return None


def violation_lines(r: Mapping[str, Any]) -> list[str]:
    """The fixed shape of a violation or error, as plain lines (the terminal colours them,
    JUnit joins them): headline; the case; mismatches and their share; the worst element
    with measured and allowed error; the greatest errors; the signature; the tolerance;
    the reproduce line."""
    v = r.get("violation") or {}
    if not isinstance(v, Mapping):
        v = {}
    verdict = str(r.get("verdict", ""))
    lines = [f"{MARK.get(verdict, '?')} {r.get('contract', '')} {r.get('id', '')}: "
             f"{r.get('message', '')}"]
    if v.get("case"):
        lines.append(f"  case: {case_text(v['case'])}")
    total, mis = as_float(v.get("total")), as_float(v.get("mismatched")) or 0
    if total:
        lines.append(f"  mismatched elements: {int(mis)} / {int(total)} "
                     f"({100 * mis / total:.1f}%)")
    if v.get("index") is not None:
        lines.append(f"  worst element {tuple(v['index'])}: actual {fmt_num(v.get('actual'))}, "
                     f"expected {fmt_num(v.get('expected'))}, measured |error| "
                     f"{fmt_num(v.get('measured'))}, allowed {fmt_num(v.get('allowed'))}")
    max_abs = as_float(v.get("max_abs"))
    if max_abs is not None and math.isfinite(max_abs):
        # (no finite error, e.g. every element overflowed: the worst element says it)
        lines.append(f"  greatest absolute error {fmt_num(max_abs)}, "
                     f"greatest relative error {fmt_num(v.get('max_rel'))}")
    code = signature_code(r)
    if code:
        shown = "; ".join(f"{k}={fmt_value(val, 120)}"
                          for k, val in signature_quantities(r).items())
        lines.append(f"  signature: {code}" + (f" — {shown}" if shown else ""))
    if r.get("tolerance"):
        lines.append(f"  tolerance: {r['tolerance']}")
    repro = r.get("reproduce") or v.get("reproduce")
    if repro:
        lines.append(f"  reproduce: {repro}")
    return lines
