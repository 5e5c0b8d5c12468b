"""The contract: eight parts plus class and claims, as one parsed object.

The same object drives checking, explaining, reporting and input generation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Protocol as _Proto

from ..frameworks import FRAMEWORKS
from ..errors import SourceLocation

#: the eight parts, in the order they are documented and explained
PARTS = ("id", "scope", "precondition", "postcondition", "tolerance", "oracle", "protocol",
         "signature")


class Expr(_Proto):
    """A compiled expression of the contract language (see :mod:`.expr`)."""

    source: str
    location: Optional[SourceLocation]

    def evaluate(self, env: Mapping[str, Any]) -> Any: ...

    @property
    def names(self) -> frozenset: ...


#: ``scope.op`` of a generic contract: it applies to any op (a template of the suite for
#: ops without contracts of their own, e.g. user-defined ones)
ANY_OP = "any"


@dataclass(frozen=True)
class Scope:
    #: the op's name (``any``: every op); for a user-defined op named by a spec in the file
    #: (``ops.py:NAME``, ``module:NAME``), the name of the op that spec defines
    op: str
    dtypes: tuple[str, ...]
    frameworks: tuple[str, ...] = field(default_factory=lambda: FRAMEWORKS)  # all registered
    #: claims that must hold for the contract to apply (else the verdict is ``skipped``)
    requires: Mapping[str, Any] = field(default_factory=dict)
    #: where a user-defined op comes from (the spec, resolved against the contract file's
    #: folder), or None for a built-in op
    op_spec: Optional[str] = None


@dataclass(frozen=True)
class Protocol:
    """The measurement protocol: how the kernel is exercised and measured."""

    kind: str
    seed: int = 0
    trials: int = 1
    families: tuple[str, ...] = ("normal",)
    shapes: tuple[Mapping[str, int], ...] = ()  # empty: the op's basic shape
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Signature:
    """The violation signature: a stable code, the diagnostic that explains it."""

    code: str
    summary: str
    detector: Optional[str] = None


@dataclass(frozen=True)
class Contract:
    id: str
    cls: str  # the taxonomy class ID, e.g. "C-PRC-01" (``class`` in the file)
    title: str
    scope: Scope
    postcondition: Expr
    tolerance: Mapping[str, Expr]  # ordered: later entries may use earlier names
    oracle: str
    protocol: Protocol
    signature: Signature
    precondition: Optional[Expr] = None
    claims: tuple[str, ...] = ()  # the claims this contract reads
    description: str = ""
    source: Optional[str] = None  # file the contract was loaded from
    location: Optional[SourceLocation] = None

    @property
    def op(self) -> str:
        return self.scope.op

    @property
    def generic(self) -> bool:
        """A template for any op (``scope.op: any``)."""
        return self.scope.op == ANY_OP

    def covers_op(self, op: str) -> bool:
        """The contract is about ``op`` (an op name): its own op, or any op (generic)."""
        return self.scope.op == op or self.generic

    def out_of_scope(self, op: str, dtype: str, framework: str,
                     claims: Any = None) -> Optional[str]:
        """Why the contract does not apply to (op, dtype, framework, claims), or None when
        it does: the one scope check.  ``claims``: anything with ``get(key)`` (the
        declared claims), checked against ``scope.requires``."""
        if not self.covers_op(op):
            return f"not in scope for op {op} (scope: {self.scope.op})"
        if dtype not in self.scope.dtypes:
            return (f"not in scope for dtype {dtype} (scope: "
                    f"{', '.join(self.scope.dtypes)})")
        if framework not in self.scope.frameworks:
            return f"not in scope for framework {framework}"
        for key, want in (self.scope.requires or {}).items() if claims is not None else ():
            have = claims.get(key)
            have_cmp = getattr(have, "name", have)
            want_cmp = getattr(want, "name", want)
            if have_cmp != want_cmp:
                return f"applies only when {key}={want_cmp} is declared (declared: {have_cmp})"
        return None

    def applies_to(self, op: str, dtype: str, framework: str, claims: Any = None) -> bool:
        return self.out_of_scope(op, dtype, framework, claims) is None


@dataclass(frozen=True)
class CheckSpec:
    """A contract file that names its kernel: ``kcontract check FILE.yaml``."""

    contracts: tuple[Contract, ...]
    kernel: Optional[str] = None
    dtype: Optional[str] = None
    framework: str = "numpy"
    device: str = "cpu"
    declare: Mapping[str, Any] = field(default_factory=dict)
    source: Optional[str] = None
