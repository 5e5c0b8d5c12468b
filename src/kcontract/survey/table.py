"""A framework's table: which library function implements each op of the suite.

Shipped as data, one YAML file per framework (``tables/<framework>.yaml``).  An entry
binds a library function to kcontract's calling convention for the op, either directly
(``function`` with its argument order and fixed keyword arguments) or through a
``wrapper`` in :mod:`kcontract.survey.wrappers`.  Ops of the suite without an entry are
*not covered*; covering one is one entry in the table.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from ..errors import UsageError, did_you_mean

TABLES = Path(__file__).resolve().parent / "tables"
ENTRY_KEYS = ("function", "args", "kwargs", "wrapper", "dtypes", "note")
TOP_KEYS = ("framework", "devices", "dtypes", "ops")


@dataclass(frozen=True)
class Implementation:
    """The library's implementation of one op."""

    op: str
    function: str  # dotted path of the library function
    args: tuple[str, ...] = ()  # the op's inputs in the function's order; () = the op's order
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    wrapper: str = ""  # module:function in kcontract's convention, when binding is not enough
    dtypes: tuple[str, ...] = ()  # () = the table's dtypes
    note: str = ""

    def describe(self) -> str:
        kw = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"{self.function}({kw})" if kw else self.function


@dataclass(frozen=True)
class Table:
    framework: str
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    entries: Mapping[str, Implementation]
    path: str = ""

    def get(self, op: str) -> Optional[Implementation]:
        return self.entries.get(op)

    def dtypes_for(self, op: str) -> tuple[str, ...]:
        impl = self.entries.get(op)
        return impl.dtypes if impl and impl.dtypes else self.dtypes


def available_tables() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in TABLES.glob("*.yaml")))


@functools.lru_cache(maxsize=None)
def load_table(framework: str) -> Table:
    """The shipped table of ``framework``; a malformed table is a clear error."""
    path = TABLES / f"{framework}.yaml"
    if not path.exists():
        raise UsageError(f"no survey table for framework {framework!r}"
                         f"{did_you_mean(framework, available_tables())}; "
                         f"tables: {', '.join(available_tables())}")
    return parse_table(yaml.safe_load(path.read_text()), str(path))


def parse_table(doc: Any, where: str = "<table>") -> Table:
    from ..formats import KERNEL_DTYPES
    if not isinstance(doc, Mapping):
        raise UsageError(f"{where}: a survey table is a mapping with {', '.join(TOP_KEYS)}")
    unknown = set(doc) - set(TOP_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")

    def dtypes(value, what):
        out = tuple(str(d) for d in (value or ()))
        for d in out:
            if d not in KERNEL_DTYPES:
                raise UsageError(f"{where}: {what}: unknown dtype {d!r}"
                                 f"{did_you_mean(d, KERNEL_DTYPES)}")
        return out

    entries = {}
    for op, spec in (doc.get("ops") or {}).items():
        if not isinstance(spec, Mapping) or "function" not in spec:
            raise UsageError(f"{where}: ops.{op}: an entry needs at least `function:`")
        bad = set(spec) - set(ENTRY_KEYS)
        if bad:
            raise UsageError(f"{where}: ops.{op}: unknown key(s) {', '.join(sorted(bad))} "
                             f"(known: {', '.join(ENTRY_KEYS)})")
        entries[str(op)] = Implementation(
            op=str(op), function=str(spec["function"]), args=tuple(spec.get("args") or ()),
            kwargs=dict(spec.get("kwargs") or {}), wrapper=str(spec.get("wrapper") or ""),
            dtypes=dtypes(spec.get("dtypes"), f"ops.{op}.dtypes"), note=str(spec.get("note") or ""))
    return Table(framework=str(doc.get("framework") or Path(where).stem),
                 devices=tuple(doc.get("devices") or ("cpu",)),
                 dtypes=dtypes(doc.get("dtypes"), "dtypes"), entries=entries, path=where)


def import_dotted(path: str):
    """``jax.numpy.matmul`` or ``torch.Tensor.to``: the longest importable module prefix,
    then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"cannot import {path}")


def kernel_spec(framework: str, op: str) -> str:
    """The kernel spec the checker loads for the library's implementation of ``op``."""
    return f"kcontract.survey.implementations:{framework}.{op}"
