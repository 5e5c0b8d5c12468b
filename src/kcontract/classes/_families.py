"""Imports every family module so their protocols and detectors register."""
from __future__ import annotations

import importlib

for _name in ("precision", "ordering", "compiler", "exceptional"):
    try:
        importlib.import_module(f"{__package__}.{_name}")
    except ModuleNotFoundError as exc:  # a family module not written yet
        if exc.name != f"{__package__}.{_name}":
            raise
