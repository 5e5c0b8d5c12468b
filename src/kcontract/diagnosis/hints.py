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


#: classes whose tolerance is derived from the working precision (``u(accumulate)``): a
#: finding of one of them may be nothing but intermediates kept in a narrower format
PRECISION_SENSITIVE = ("C-PRC-01", "C-PRC-02", "C-PRC-04", "C-CMP-01", "C-CMP-03", "C-EXC-01",
                       "C-PRC-03", "C-ORD-01")


def input_format_candidate(fs: Sequence[Finding], dtype: Optional[str],
                           declared: Mapping[str, Any]) -> Optional[tuple[str, str]]:
    """``("accumulate", dtype)`` when the kernel's inputs are in a format narrower than the
    working precision the claims give it and a finding could be that precision alone: the
    commonest 16-bit behaviour (every op of a formula evaluated and rounded in the input
    format) is then re-judged under the claim that describes it."""
    if not dtype:
        return None
    from ..formats import get_format
    from ..language.claims import make_claims
    try:
        fmt = get_format(dtype)
        acc = make_claims(fmt, {k: str(v) for k, v in declared.items()}).accumulate
    except Exception:
        return None
    if fmt.precision >= acc.precision or fmt.precision < 8:  # 16-bit formats, not fp8
        return None
    if not any(f.cls in PRECISION_SENSITIVE and not f.is_error for f in fs):
        return None
    return ("accumulate", fmt.name)


def candidates(diag: Diagnosis, fs: Sequence[Finding], declared: Mapping[str, Any],
               dtype: Optional[str] = None) -> list:
    """(key, value) claims the primary causes suggest, not already declared so."""
    by_id = {f.id: f for f in fs}
    out: list[tuple[str, str]] = []
    own = input_format_candidate(fs, dtype, declared)
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
    if own is not None:
        out.append(own)
    if dtype:  # no working precision narrower in range than the data is proposed
        from ..formats import holds_range
        out = [kv for kv in out if kv[0] != "accumulate" or holds_range(kv[1], dtype)]
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

    def judge(extra: Mapping[str, str]) -> Optional[Hint]:
        decl = {**{k: str(v) for k, v in declared.items()}, **extra}
        rec = Recording({"kernel": kernel, "op": op, "dtype": dtype, "framework": framework,
                         "device": device, "declare": decl, "classes": bad, "seed": seed,
                         "kernel_info": {}}, calls)
        try:
            again, _ = replay(rec, contracts=contracts)
        except ReplayError:
            return None  # the protocol needs a call not recorded under this claim: no hint
        now = {r.id: r.verdict.value for r in again.results}
        still = {r.id: r.message for r in again.results if r.verdict.value not in ("pass", "skipped")}
        # a contract that no longer applies under the claim (it judges only the other
        # policy) is resolved by it as much as one that passes
        resolves = tuple(i for i in bad if now.get(i) in ("pass", "skipped"))
        if not resolves:
            return None
        remaining = tuple(i for i in bad if now.get(i) not in ("pass", "skipped"))
        return Hint(" and ".join(f"{k}={v}" for k, v in extra.items()), resolves, remaining,
                    conforms=not remaining, still={i: still[i] for i in remaining if i in still})

    hints: list[Hint] = []
    for key, value in candidates(diag, fs, declared, dtype):
        h = judge({key: value})
        if h is not None:
            hints.append(h)
    # no one claim describes the kernel, but together they might: one per key, each of
    # which resolved something on its own (accumulate=bfloat16 and subnormals=flush)
    if len(hints) > 1 and not any(h.conforms for h in hints):
        both: dict[str, str] = {}
        for h in hints:
            k, _, v = h.claim.partition("=")
            both.setdefault(k, v)
        if len(both) > 1:
            h = judge(both)
            if h is not None and h.conforms:
                hints.insert(0, h)
    return hints
