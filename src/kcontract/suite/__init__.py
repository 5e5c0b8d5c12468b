"""The normative suite: contract files (``contracts/*.yaml``) and calibration kernels.

The suite is written in the contract language; Python supplies only the
vocabulary (:mod:`kcontract.classes`).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

CONTRACTS_DIR = Path(__file__).parent / "contracts"


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


def get_contract(ident: str):
    for c in _load():
        if c.id == ident:
            return c
    return None
