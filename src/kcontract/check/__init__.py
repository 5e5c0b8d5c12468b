"""The checker: protocol engine, isolated kernel worker, verdicts.

Nothing is imported here: a kernel's worker (:mod:`.worker`) is a module of this package,
and it needs numpy and an adapter, not the contract language or the ops.  The names below
come from :mod:`.verdict` and :mod:`.runner` on first use."""
from __future__ import annotations

_NAMES = {"Case": "verdict", "ContractResult": "verdict", "RunResult": "verdict",
          "Status": "verdict", "Violation": "verdict", "check": "runner",
          "select_contracts": "runner"}


def __getattr__(name: str):
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'kcontract.check' has no attribute {name!r}")
    from importlib import import_module
    return getattr(import_module(f".{module}", __name__), name)


__all__ = list(_NAMES)
