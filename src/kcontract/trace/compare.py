"""Two traces of the same model: do the outputs agree, where do the runs part, and whose
contract breaks.

1. **Agreement.**  For a language model (integer ids in, logits out): greedy next-token
   agreement (the argmax at each sequence's last position) and top-1 agreement over
   every position; otherwise error statistics of B's outputs against A's.  A trial that
   raised on one side only counts as disagreeing in every sequence.
2. **Alignment.**  Per trial, the two op sequences are aligned on (module path, aten op)
   (:class:`difflib.SequenceMatcher`), so an extra op on one side does not shift the rest.
3. **Divergence.**  For each aligned pair: bitwise equal or not, the normwise relative
   distance ``||A - B|| / ||A||`` of the first output (its growth through the model is
   plotted), and whether the two sides' inputs were the same.
4. **Arbitration.**  Every pair that differs and maps to a checkable kcontract op is
   judged three ways against the float64 oracle: each side's output against the
   oracle on *its own* recorded inputs under the suite's contracts (:mod:`.judge`), and
   the distance between the sides against the sum of their tolerances.  The cause of a
   difference is a side's violation, or (both conforming) inputs that already differed
   (propagated from upstream), or a difference within the bounds.
5. **The first op at which the runs part**, per trial: the first pair where one side
   raised and the other did not, or whose distance exceeds both sides' tolerances
   together; its arbitration is the trial's primary cause.
"""
from __future__ import annotations

import difflib
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from .. import __version__
from ..check.verdict import jsonable
from ..errors import UsageError
from .coverage import DATA_MOVEMENT, op_call, packet, target
from .judge import judge_call
from .kct import Trace

COMPARE_SCHEMA = "kcontract.trace-comparison/1"


@dataclass
class Comparison:
    data: dict

    @property
    def exit_code(self) -> int:
        """0: no side violates a contract on its recorded inputs; 1: one does."""
        return 1 if self.data.get("violators") else 0

    def to_json(self) -> dict:
        return self.data


# -- helpers ---------------------------------------------------------------------------------

def _key(rec: dict) -> tuple:
    return (rec.get("module", ""), packet(rec["op"]))


def _shas(values) -> list:
    out = []
    for v in values or []:
        if isinstance(v, dict) and "tensor" in v:
            out.append(v["tensor"]["sha256"])
        elif isinstance(v, list):
            out.append(tuple(_shas(v)))
        else:
            out.append(repr(v))
    return out


def _first_out(rec: dict, trace: Trace) -> Optional[np.ndarray]:
    outs = rec.get("outputs") or []
    if not outs or not isinstance(outs[0], dict) or "tensor" not in outs[0]:
        return None
    return trace.tensor(outs[0]["tensor"])


def rel_distance(a: Optional[np.ndarray], b: Optional[np.ndarray]) -> Optional[float]:
    """||a - b|| / ||a|| in float64 (inf when the shapes differ or only one is finite)."""
    if a is None or b is None:
        return None
    if np.shape(a) != np.shape(b):
        return float("inf")
    x = np.asarray(a).astype(np.float64)
    y = np.asarray(b).astype(np.float64)
    with np.errstate(all="ignore"):
        d = np.where(np.isnan(x) & np.isnan(y), 0.0, x - y)
        d = np.where(np.isinf(x) & (x == y), 0.0, d)
        num = float(np.sqrt(np.sum(d * d)))
        den = float(np.sqrt(np.sum(np.where(np.isfinite(x), x, 0.0) ** 2)))
    if not np.isfinite(num):
        return float("inf")
    return num / den if den > 0 else (0.0 if num == 0 else float("inf"))


def align(a_ops: Sequence[dict], b_ops: Sequence[dict]) -> list[tuple[Optional[int], Optional[int]]]:
    """Pairs of positions (None where one side has no counterpart)."""
    ka, kb = [_key(r) for r in a_ops], [_key(r) for r in b_ops]
    sm = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
    pairs: list = []
    ia = ib = 0
    for blk in sm.get_matching_blocks():
        pairs += [(i, None) for i in range(ia, blk.a)] + [(None, j) for j in range(ib, blk.b)]
        pairs += [(blk.a + k, blk.b + k) for k in range(blk.size)]
        ia, ib = blk.a + blk.size, blk.b + blk.size
    return pairs


# -- agreement ---------------------------------------------------------------------------------

def is_language_model(trace: Trace) -> bool:
    for t in trace.trials:
        if t.inputs and isinstance(t.inputs[0], np.ndarray):
            out = t.output
            return (t.inputs[0].dtype.kind in "iu" and (out is None or (
                np.asarray(out).ndim >= 2 and np.asarray(out).dtype.kind == "f")))
    return False


def agreement(ta: Trace, tb: Trace, la: str, lb: str) -> dict:
    trials_b = {t.index: t for t in tb.trials}
    pairs = [(t, trials_b[t.index]) for t in ta.trials if t.index in trials_b]
    lm = is_language_model(ta) or is_language_model(tb)
    one_sided = []
    if lm:
        nxt = nxt_n = top = top_n = 0
        for A, B in pairs:
            if A.ok and B.ok:
                xa, xb = np.asarray(A.output), np.asarray(B.output)
                if xa.shape != xb.shape:
                    one_sided.append({"trial": A.index, "why": "output shapes differ"})
                    continue
                ga, gb = xa[..., -1, :].argmax(-1), xb[..., -1, :].argmax(-1)
                nxt += int(np.sum(ga == gb))
                nxt_n += int(ga.size)
                pa, pb = xa.argmax(-1), xb.argmax(-1)
                top += int(np.sum(pa == pb))
                top_n += int(pa.size)
            elif A.ok != B.ok:
                out = np.asarray(A.output if A.ok else B.output)
                seqs = int(np.prod(out.shape[:-2])) if out.ndim >= 2 else 1
                nxt_n += seqs
                top_n += int(np.prod(out.shape[:-1])) if out.ndim >= 1 else 1
                failed = B if A.ok else A
                one_sided.append({"trial": A.index, "raised": lb if A.ok else la,
                                  "why": failed.describe()})
        return {"kind": "language model", "next_token": _share(nxt, nxt_n),
                "top1": _share(top, top_n), "trials": len(pairs), "one_sided": one_sided,
                "both_ok": sum(1 for A, B in pairs if A.ok and B.ok)}
    stats = {"max_abs": 0.0, "max_rel": 0.0, "normwise_rel": 0.0}
    for A, B in pairs:
        if A.ok and B.ok:
            xa = np.asarray(A.output).astype(np.float64)
            xb = np.asarray(B.output).astype(np.float64)
            if xa.shape != xb.shape:
                one_sided.append({"trial": A.index, "why": "output shapes differ"})
                continue
            with np.errstate(all="ignore"):
                d = np.abs(xa - xb)
                r = d / np.abs(xa)
            stats["max_abs"] = max(stats["max_abs"], float(np.nanmax(d)) if d.size else 0.0)
            rr = r[np.isfinite(r)]
            stats["max_rel"] = max(stats["max_rel"], float(rr.max()) if rr.size else 0.0)
            stats["normwise_rel"] = max(stats["normwise_rel"], rel_distance(xa, xb) or 0.0)
        elif A.ok != B.ok:
            one_sided.append({"trial": A.index, "raised": lb if A.ok else la,
                              "why": (B if A.ok else A).describe()})
    return {"kind": "error statistics", **stats, "trials": len(pairs), "one_sided": one_sided,
            "both_ok": sum(1 for A, B in pairs if A.ok and B.ok)}


def _share(k: int, n: int) -> dict:
    return {"agree": k, "total": n, "percent": 100.0 * k / n if n else 100.0}


# -- one aligned pair --------------------------------------------------------------------------

def _pair(ra: dict, rb: dict, ta: Trace, tb: Trace, la: str, lb: str) -> dict:
    same_in = (_shas(ra.get("args")) == _shas(rb.get("args"))
               and _shas(ra.get("kwargs", {}).values()) == _shas(rb.get("kwargs", {}).values()))
    sa, sb = ra.get("status"), rb.get("status")
    same_out = sa == sb and _shas(ra.get("outputs")) == _shas(rb.get("outputs"))
    row = {"trial": ra.get("trial"), "a_index": ra["index"], "b_index": rb["index"],
           "op": ra["op"], "module": ra.get("module", ""), "same_inputs": same_in,
           "same_output": same_out, "a_status": sa, "b_status": sb}
    t = target(ra["op"])
    row["kcontract_op"] = t.op if t else None
    if sa == "ok" and sb == "ok":
        row["distance"] = rel_distance(_first_out(ra, ta), _first_out(rb, tb))
    elif sa != sb:
        row["distance"] = float("inf")
    if same_out:
        return row
    return _arbitrate(row, ra, rb, ta, tb, la, lb)


def _arbitrate(row: dict, ra: dict, rb: dict, ta: Trace, tb: Trace, la: str, lb: str) -> dict:
    ca, cb = op_call(ra, ta.tensors), op_call(rb, tb.tensors)
    if ca is None or cb is None:
        row["cause"] = "not judged"
        row["finding"] = ("not covered by a checkable kcontract op" if row["kcontract_op"] is None
                          or ca is None and cb is None else "one side's call could not be judged")
        return row
    ja = judge_call(ca, raised=ra.get("error_type") if ra.get("status") != "ok" else None,
                    declare=ta.manifest.get("declare"))
    jb = judge_call(cb, raised=rb.get("error_type") if rb.get("status") != "ok" else None,
                    declare=tb.manifest.get("declare"))
    row["a"] = [j.as_dict() for j in ja]
    row["b"] = [j.as_dict() for j in jb]
    bad = [(la, j) for j in ja if j.verdict != "pass"] + [(lb, j) for j in jb if j.verdict != "pass"]
    roles = {}
    for side, js in ((la, ja), (lb, jb)):
        roles.update({(side, k): v for k, v in _roles(js, ca.dtype).items()})
    # each side's primary causes first, the violations that follow from them after
    bad.sort(key=lambda sj: (sj[0] != la, roles.get((sj[0], sj[1].contract_id), ("", 1))[1]))
    row["violations"] = [{"side": s, "contract_class": j.contract_class,
                          "cause_class": roles.get((s, j.contract_id), (j.contract_class, 0))[0],
                          "contract_id": j.contract_id, "verdict": j.verdict,
                          "cause": j.cause, "message": j.message} for s, j in bad]
    # the distance between the sides against the sum of their tolerances (same element)
    parted = ra.get("status") != rb.get("status")
    ratio = None
    tola = next((j.tol for j in ja if j.tol is not None), None)
    tolb = next((j.tol for j in jb if j.tol is not None), None)
    if not parted and tola is not None and tolb is not None and ca.out is not None \
            and cb.out is not None and np.shape(ca.out) == np.shape(cb.out):
        d = np.abs(np.asarray(ca.out, np.float64) - np.asarray(cb.out, np.float64))
        with np.errstate(all="ignore"):
            r = np.where(d == 0, 0.0, d / np.maximum(tola + tolb, 1e-300))
        r = np.where(np.isnan(r), np.inf, r)
        ratio = float(r.max()) if r.size else 0.0
        parted = ratio > 1.0
    elif not parted and any(j.contract_class == "C-EXC-02" for j in ja + jb):
        parted = True  # a gather's rows are exact: any difference parts the runs
    row["bound_ratio"] = ratio
    row["parted"] = bool(parted)
    if bad:
        row["cause"] = "violation"
        row["finding"] = _finding(bad, roles)
    elif not row["same_inputs"]:
        row["cause"] = "propagated"
        row["finding"] = ("both sides conform on their own inputs; the inputs already differed "
                          "(propagated from upstream)")
    else:
        row["cause"] = "within bounds"
        row["finding"] = ("same inputs, both sides conform"
                          + (f"; distance {ratio:.2g} of tol({la}) + tol({lb})"
                             if ratio is not None else ""))
    return row


def _roles(js: list, dtype: str) -> dict:
    """contract id -> (the class of the cause it shows or follows from, 0 for a primary
    cause and 1 for a consequence), from the run-level diagnosis of one call's judgments."""
    from ..diagnosis import diagnose
    results = [{"id": j.contract_id, "contract": j.contract_class, "verdict": j.verdict,
                "message": j.message,
                "signature": {k: v for k, v in (j.cause or {}).items() if k != "summary"}}
               for j in js if j.verdict != "pass"]
    if not results:
        return {}
    d = diagnose({"dtype": dtype, "results": results})
    out = {}
    for c in d.primary:
        for cid in c.contracts:
            out[cid] = (c.cls if c.kind != "error" else "kernel", 0)
    for cid, e in d.explained.items():
        out[cid] = (e.by_class, 1)
    return out


def _finding(bad: list, roles: Optional[dict] = None) -> str:
    """One clause per side and cause: "B violates C-PRC-04 (prc01-matmul, prc04-matmul):
    operands rounded to bf16 ..." -- the class of the cause the diagnosis names, and the
    contracts that show it or follow from it."""
    roles = roles or {}
    groups: dict = OrderedDict()
    for side, j in bad:
        why = j.cause.get("summary") or j.message
        groups.setdefault((side, why), []).append(j)
    clauses = []
    for (side, why), js in groups.items():
        verb = "violates" if all(j.verdict == "violation" for j in js) else "fails"
        classes = list(dict.fromkeys(roles.get((side, j.contract_id), (j.contract_class, 0))[0]
                                     for j in js))
        ids = ", ".join(j.contract_id for j in js)
        clauses.append(f"{side} {verb} {' and '.join(classes)} ({ids}): {why}")
    return "; ".join(clauses)


# -- the comparison ------------------------------------------------------------------------------

def compare_traces(a: Trace | str, b: Trace | str, *, labels: Optional[Sequence[str]] = None
                   ) -> Comparison:
    ta = a if isinstance(a, Trace) else Trace.load(a)
    tb = b if isinstance(b, Trace) else Trace.load(b)
    la, lb = labels or (ta.label, tb.label)
    if la == lb:
        la, lb = f"A ({la})", f"B ({lb})"
    notes = []
    ma, mb = ta.manifest, tb.manifest
    if ma.get("model_sha256") != mb.get("model_sha256"):
        notes.append(f"the traces are of different model files ({ma.get('model')} "
                     f"{str(ma.get('model_sha256'))[:12]} vs {mb.get('model')} "
                     f"{str(mb.get('model_sha256'))[:12]})")
    if ma.get("seed") != mb.get("seed"):
        raise UsageError(f"the traces were recorded with different seeds ({ma.get('seed')} vs "
                         f"{mb.get('seed')}): the models and inputs differ")
    for side, m in ((la, ma), (lb, mb)):
        if m.get("tensors_dropped"):
            notes.append(f"{side}: {m['tensors_dropped']} tensors beyond the size budget were "
                         "not kept; calls that need them are not judged")
    by_trial_a = _by_trial(ta)
    by_trial_b = _by_trial(tb)
    rows, firsts, unmatched, stopped = [], [], 0, 0
    for trial in sorted(set(by_trial_a) & set(by_trial_b)):
        oa, ob = by_trial_a[trial], by_trial_b[trial]
        first = None
        first_diff = None
        ended = {t.index: t.ok for t in ta.trials}.get(trial, True) and \
            {t.index: t.ok for t in tb.trials}.get(trial, True)
        for ia, ib in align(oa, ob):
            if ia is None or ib is None:
                if ended:
                    unmatched += 1
                else:
                    stopped += 1
                continue
            row = _pair(oa[ia], ob[ib], ta, tb, la, lb)
            row["position"] = ia
            rows.append(row)
            if first_diff is None and not row["same_output"]:
                first_diff = row
            if first is None and row.get("parted"):
                first = row
        firsts.append({"trial": trial, "first_difference": _brief(first_diff),
                       "first_parting": _brief(first), "primary_cause": _primary(first)})
    if unmatched:
        notes.append(f"{unmatched} op call(s) have no counterpart on the other side (the op "
                     "sequences differ there)")
    if stopped:
        notes.append(f"{stopped} op call(s) of trials that raised on one side have no "
                     "counterpart (that side stopped at the op that raised)")
    sites = _sites(rows)
    violators = sorted({v["side"] for r in rows for v in r.get("violations", [])})
    cover = {la: ma.get("coverage"), lb: mb.get("coverage")}
    data = {
        "schema": COMPARE_SCHEMA, "a": _side(la, ta), "b": _side(lb, tb),
        "agreement": agreement(ta, tb, la, lb), "ops_compared": len(rows),
        "ops_differing": sum(1 for r in rows if not r["same_output"]),
        "trials": firsts, "sites": sites, "violators": violators,
        "primary_causes": _tally(firsts), "coverage": cover,
        "divergence": [{"trial": r["trial"], "position": r["position"], "op": r["op"],
                        "module": r["module"], "distance": r.get("distance"),
                        "cause": r.get("cause"), "violation": bool(r.get("violations"))}
                       for r in rows if packet(r["op"]) not in DATA_MOVEMENT],
        "notes": notes, "compared_with": {"kcontract": __version__},
    }
    return Comparison(jsonable(data))


def _by_trial(trace: Trace) -> dict:
    out: dict = OrderedDict()
    for rec in trace.ops:
        out.setdefault(int(rec.get("trial", 0)), []).append(rec)
    for t in trace.trials:
        out.setdefault(t.index, [])
    return out


def _brief(row: Optional[dict]) -> Optional[dict]:
    if row is None:
        return None
    keep = ("trial", "position", "op", "module", "kcontract_op", "a_status", "b_status",
            "distance", "bound_ratio", "same_inputs", "cause", "finding")
    return {k: row.get(k) for k in keep}


def _primary(row: Optional[dict]) -> Optional[dict]:
    if row is None or not row.get("violations"):
        return None
    v = row["violations"][0]
    return {"side": v["side"], "contract_class": v.get("cause_class") or v["contract_class"],
            "shown_by": v["contract_class"],
            "contract_id": v["contract_id"], "code": v["cause"].get("code"),
            "summary": v["cause"].get("summary") or v["message"], "op": row["op"],
            "module": row["module"], "others": [
                {"side": w["side"], "contract_class": w["contract_class"],
                 "contract_id": w["contract_id"]} for w in row["violations"][1:]]}


def _tally(firsts: list) -> list:
    c = Counter()
    for f in firsts:
        p = f.get("primary_cause")
        if p:
            c[(p["side"], p["contract_class"], p["module"], p["op"], p["summary"])] += 1
    return [{"side": s, "contract_class": cls, "module": m, "op": op, "summary": summ,
             "trials": n} for (s, cls, m, op, summ), n in c.most_common()]


def _sites(rows: list) -> list:
    """Differing pairs grouped by where they happen (module path, aten op)."""
    groups: dict = OrderedDict()
    for r in rows:
        if r["same_output"]:
            continue
        groups.setdefault((r["module"], r["op"]), []).append(r)
    out = []
    for (module, op), rs in groups.items():
        causes = Counter(r.get("cause", "not judged") for r in rs)
        viol = OrderedDict()
        for r in rs:
            for v in r.get("violations", []):
                key = (v["side"], v["contract_class"], v["contract_id"])
                viol.setdefault(key, {"side": v["side"], "contract_class": v["contract_class"],
                                      "cause_class": v.get("cause_class") or v["contract_class"],
                                      "contract_id": v["contract_id"], "calls": 0,
                                      "code": v["cause"].get("code"),
                                      "operand_format": v["cause"].get("operand_format"),
                                      "summary": v["cause"].get("summary") or v["message"]})
                viol[key]["calls"] += 1
        dists = [r["distance"] for r in rs if r.get("distance") is not None]
        out.append({"module": module, "op": op, "kcontract_op": rs[0].get("kcontract_op"),
                    "calls": len(rs), "causes": dict(causes), "violations": list(viol.values()),
                    "max_distance": max(dists) if dists else None,
                    "example": {k: rs[0].get(k) for k in ("trial", "position", "finding")}})
    return out


def _side(label: str, trace: Trace) -> dict:
    m = trace.manifest
    env = m.get("environment") or {}
    pre = m.get("prelude") or {}
    return {"label": label, "file": trace.path, "model": m.get("model"),
            "model_sha256": m.get("model_sha256"), "device": m.get("device"),
            "device_name": env.get("device_name"), "torch": env.get("torch"),
            "prelude": pre.get("file"), "prelude_sha256": pre.get("sha256"),
            "matmul_precision": m.get("matmul_precision"), "declare": m.get("declare") or {},
            "ops": len(trace.ops), "trials": [t.describe() for t in trace.trials],
            "recorded_at": m.get("recorded_at")}
