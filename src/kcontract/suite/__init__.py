"""The normative suite: contract files (``contracts/*.yaml``) and calibration kernels.

The suite is written in the contract language; Python supplies only the
vocabulary (:mod:`kcontract.classes`).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

CONTRACTS_DIR = Path(__file__).parent / "contracts"
#: the generic contracts (``scope.op: any``): templates for ops without contracts of their
#: own in the suite, e.g. user-defined ones
GENERIC_DIR = Path(__file__).parent / "generic"


@lru_cache(maxsize=1)
def _load() -> tuple:
    from ..language.loader import load_contracts
    out = []
    seen: dict[str, str] = {}
    for path in sorted(CONTRACTS_DIR.glob("*.yaml")):
        for c in load_contracts(str(path)):
            if c.id in seen:
                from ..errors import ContractError
                raise ContractError(f"duplicate contract id {c.id!r} (also in {seen[c.id]})")
            seen[c.id] = path.name
            out.append(c)
    return tuple(out)


def load_suite() -> list:
    """Every contract of the normative suite, parsed and validated."""
    return list(_load())


@lru_cache(maxsize=1)
def _load_generic() -> tuple:
    from ..language.loader import load_contracts
    return tuple(c for path in sorted(GENERIC_DIR.glob("*.yaml"))
                 for c in load_contracts(str(path)))


def load_generic() -> list:
    """The generic contracts (``scope.op: any``): C-PRC-01 against the float64 oracle,
    C-ORD-02, C-ORD-03, C-CMP-03 and C-EXC-01, for any op."""
    return list(_load_generic())


def get_contract(ident: str):
    for c in _load() + _load_generic():
        if c.id == ident:
            return c
    return None
