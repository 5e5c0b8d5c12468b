"""The contract: eight parts plus class and claims, as one parsed object.

The same object drives checking, explaining, reporting and input generation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Protocol as _Proto

from ..adapters import FRAMEWORKS
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


@dataclass(frozen=True)
class Scope:
    op: str
    dtypes: tuple[str, ...]
    frameworks: tuple[str, ...] = field(default_factory=lambda: FRAMEWORKS)  # all registered
    #: claims that must hold for the contract to apply (else the verdict is ``skipped``)
    requires: Mapping[str, Any] = field(default_factory=dict)


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

    def applies_to(self, op: str, dtype: str, framework: str) -> bool:
        return (self.scope.op == op and dtype in self.scope.dtypes
                and framework in self.scope.frameworks)


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
