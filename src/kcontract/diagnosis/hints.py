"""Hints: a claim under which the kernel conforms, found by re-judging the recorded evidence.

The run's calls are recorded (their outputs kept by call key, as ``kcontract record`` keeps
them); for each claim a primary cause suggests (the accumulator format the fingerprint
measured, ``approximation=tanh`` for a substituted tanh-GELU, ``subnormals=flush`` for a
flush, the index policy observed, ...), the failing contracts are run again under that claim,
served from the recording (no new kernel call), and judged by the same oracle.  A hint is given
only for claims under which some finding really passes; a protocol that would need a call not
recorded under the new claim gives no hint.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from .model import Diagnosis, Finding, Hint

POLICIES = ("clamp", "wrap", "zero")


def candidates(diag: Diagnosis, fs: Sequence[Finding], declared: Mapping[str, Any]) -> list:
    """(key, value) claims the primary causes suggest, not already declared so."""
    by_id = {f.id: f for f in fs}
    out: list[tuple[str, str]] = []
    for cause in diag.primary:
        f = by_id.get(cause.contracts[0])
        if f is None or f.is_error:
            continue
        q = f.quantities
        if cause.cls in ("C-PRC-01", "C-PRC-04"):
            for key in ("accumulator_format", "operand_format"):
                if isinstance(q.get(key), str) and q.get(key) not in ("float32", "float64"):
                    out.append(("accumulate", q[key]))
        elif cause.cls == "C-CMP-01" and "approximation" in f.signature:
            out.append(("approximation", "tanh"))
        elif cause.cls == "C-PRC-03":
            out.append(("subnormals", "flush"))
        elif cause.cls == "C-EXC-02":
            text = f.message
            out += [("oob", p) for p in POLICIES if p in text]
        elif cause.cls == "C-EXC-01" and "saturate" in f.message:
            out.append(("overflow", "saturate"))
        elif cause.cls == "C-ORD-02":
            out.append(("deterministic", "false"))
    seen, unique = set(), []
    for kv in out:
        if kv not in seen and str(declared.get(kv[0], "")) != kv[1]:
            seen.add(kv)
            unique.append(kv)
    return unique


def find_hints(run, calls: Iterable, *, kernel: str, op: str, dtype: str, framework: str,
               device: str, declared: Mapping[str, Any], seed: int, contracts=None,
               diag: Optional[Diagnosis] = None) -> list[Hint]:
    """Re-judge the recorded ``calls`` of ``run`` under each candidate claim."""
    from ..records.arbitrate import Recording, ReplayError, replay
    from . import diagnose, findings
    diag = diag or diagnose(run)
    fs = findings(run)
    bad = [f.id for f in fs]
    if not bad:
        return []
    calls = list(calls)
    hints: list[Hint] = []
    for key, value in candidates(diag, fs, declared):
        decl = {**{k: str(v) for k, v in declared.items()}, key: value}
        rec = Recording({"kernel": kernel, "op": op, "dtype": dtype, "framework": framework,
                         "device": device, "declare": decl, "classes": bad, "seed": seed,
                         "kernel_info": {}}, calls)
        try:
            again, _ = replay(rec, contracts=contracts)
        except ReplayError:
            continue  # the protocol needs a call not recorded under this claim: no hint
        now = {r.id: r.verdict.value for r in again.results}
        # a contract that no longer applies under the claim (it judges only the other
        # policy) is resolved by it as much as one that passes
        resolves = tuple(i for i in bad if now.get(i) in ("pass", "skipped"))
        if not resolves:
            continue
        remaining = tuple(i for i in bad if now.get(i) not in ("pass", "skipped"))
        hints.append(Hint(f"{key}={value}", resolves, remaining, conforms=not remaining))
    return hints
