"""The vocabulary the suite's contract files use.

The twelve classes (:mod:`.taxonomy`), and per family the measurement protocols
and signature detectors contract files name.  Importing this package registers
them with :mod:`kcontract.language.registry`.
"""
from __future__ import annotations

from .taxonomy import CLASSES, FAMILIES, PRIMITIVES, ContractClass
from . import common  # noqa: F401  (registers protocols)
from . import _families  # noqa: F401  (imports the per-family modules that exist)

__all__ = ["CLASSES", "FAMILIES", "PRIMITIVES", "ContractClass"]
