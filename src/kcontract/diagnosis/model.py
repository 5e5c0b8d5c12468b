"""The diagnosis as values: findings read off a run, causes, explanations and hints."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

BAD = ("violation", "error")


@dataclass(frozen=True)
class Finding:
    """One violated (or errored) contract of a run, as the diagnosis reads it."""

    id: str  # contract id
    cls: str  # contract class
    verdict: str  # violation | error
    code: str  # signature code, e.g. C-PRC-01.narrow-accumulator or kernel.raised
    message: str
    quantities: Mapping[str, Any] = field(default_factory=dict)
    violation: Mapping[str, Any] = field(default_factory=dict)

    @property
    def signature(self) -> str:
        """The part of the code after the class (``narrow-accumulator``)."""
        return self.code.split(".", 1)[1] if self.code.startswith(self.cls + ".") else self.code

    @property
    def is_error(self) -> bool:
        return self.verdict == "error"

    @classmethod
    def from_result(cls, r: Mapping[str, Any]) -> Optional["Finding"]:
        verdict = str(r.get("verdict", ""))
        if verdict not in BAD:
            return None
        sig = r.get("signature") if isinstance(r.get("signature"), Mapping) else {}
        v = r.get("violation") if isinstance(r.get("violation"), Mapping) else {}
        code = str(sig.get("code") or v.get("code") or "")
        q = {k: val for k, val in sig.items() if k not in ("code", "summary", "details")}
        return cls(id=str(r.get("id", "")), cls=str(r.get("contract", "")), verdict=verdict,
                   code=code, message=str(r.get("message", "")), quantities=q, violation=v)


@dataclass(frozen=True)
class Cause:
    """A primary cause: the class whose promise the kernel breaks, the contracts that show
    it, and what it is in words."""

    cls: str  # the class of the cause (may differ from the contract's: C-PRC-01 naming C-PRC-04)
    contracts: tuple  # contract ids whose findings are this cause (the first one decides)
    code: str
    text: str  # one line: what the kernel does
    kind: str = "violation"  # violation | error (a kernel error: raised, crashed, wrong dtype)

    def to_json(self) -> dict:
        return {"class": self.cls, "contracts": list(self.contracts), "code": self.code,
                "cause": self.text, "kind": self.kind}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Cause":
        return cls(cls=str(d.get("class", "")), contracts=tuple(d.get("contracts") or ()),
                   code=str(d.get("code", "")), text=str(d.get("cause", "")),
                   kind=str(d.get("kind", "violation")))


@dataclass(frozen=True)
class Explanation:
    """A violation that is a consequence of a primary cause."""

    contract: str  # the explained contract id
    by: str  # the contract id of the primary cause
    by_class: str
    reason: str

    def to_json(self) -> dict:
        return {"by": self.by, "class": self.by_class, "reason": self.reason}


@dataclass(frozen=True)
class Hint:
    """A claim under which the recorded evidence conforms (re-judged, not guessed)."""

    claim: str  # KEY=VALUE
    resolves: tuple  # contract ids that pass under it
    remaining: tuple  # contract ids that still fail under it
    conforms: bool  # every finding of the run passes under it
    #: contract id -> its message re-judged under the claim (the contracts still failing)
    still: Mapping[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        if self.conforms:
            return f"conforms if declared {self.claim}"
        return (f"declared {self.claim}, {', '.join(self.resolves)} would pass; "
                f"{', '.join(self.remaining)} would still fail")

    def to_json(self) -> dict:
        return {"claim": self.claim, "conforms": self.conforms, "resolves": list(self.resolves),
                "remaining": list(self.remaining), "text": self.text, "still": dict(self.still)}


@dataclass(frozen=True)
class Diagnosis:
    primary: tuple = ()  # of Cause
    explained: Mapping[str, Explanation] = field(default_factory=dict)
    hints: tuple = ()  # of Hint

    @property
    def empty(self) -> bool:
        return not self.primary

    def consequences(self, cause: Cause) -> list[Explanation]:
        return [e for e in self.explained.values() if e.by in cause.contracts]

    def to_json(self) -> dict:
        return {"primary": [c.to_json() for c in self.primary],
                "explained": {k: e.to_json() for k, e in self.explained.items()},
                "hints": [h.to_json() for h in self.hints]}

    @classmethod
    def from_json(cls, d: Optional[Mapping[str, Any]]) -> Optional["Diagnosis"]:
        if not isinstance(d, Mapping):
            return None
        primary = tuple(Cause.from_json(c) for c in d.get("primary") or ()
                        if isinstance(c, Mapping))
        explained = {str(k): Explanation(str(k), str(e.get("by", "")), str(e.get("class", "")),
                                         str(e.get("reason", "")))
                     for k, e in (d.get("explained") or {}).items() if isinstance(e, Mapping)}
        hints = tuple(Hint(str(h.get("claim", "")), tuple(h.get("resolves") or ()),
                           tuple(h.get("remaining") or ()), bool(h.get("conforms")),
                           {str(k): str(v) for k, v in (h.get("still") or {}).items()})
                      for h in d.get("hints") or () if isinstance(h, Mapping))
        return cls(primary, explained, hints)
