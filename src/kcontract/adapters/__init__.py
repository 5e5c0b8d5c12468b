"""Framework adapters behind one small interface; heavy frameworks load lazily.

Adding a framework is one module (an :class:`Adapter` subclass) plus one line in
:data:`REGISTRY`: the CLI's ``--framework`` choices, the contract language's
``scope.frameworks`` names and every contract's default scope are read from it.
"""
from __future__ import annotations

import importlib

from ..errors import UsageError, did_you_mean
from .base import Adapter

from ..frameworks import FRAMEWORKS, REGISTRY


def adapter_class(name: str) -> type[Adapter]:
    """The adapter class registered as ``name`` (its module imported, not its framework)."""
    if name not in REGISTRY:
        raise UsageError(f"unknown framework {name!r}{did_you_mean(name, list(REGISTRY))}; "
                         f"known: {', '.join(REGISTRY)}")
    module, _, cls = REGISTRY[name].partition(":")
    path = module if "." in module else f"{__name__}.{module}"
    return getattr(importlib.import_module(path), cls)


def get_adapter(name: str) -> Adapter:
    adapter = adapter_class(name)()
    if not adapter.available():
        raise UsageError(f"--framework {name} needs {adapter.requirement}: "
                         f"pip install 'kcontract[{name}]'")
    return adapter


__all__ = ["Adapter", "FRAMEWORKS", "REGISTRY", "adapter_class", "get_adapter"]
