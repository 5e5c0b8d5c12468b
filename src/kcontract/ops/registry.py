"""Where ops come from: the built-in ones, user-defined ones named by a spec, and
third-party packages through the entry-point group ``kcontract.ops``.

An op is named by its name (``matmul``; a user op already loaded; an entry point's
name), or by a spec ``path/to/ops.py:NAME`` (relative to a base folder, the contract
file's for ``scope.op``) or ``package.module:NAME``: the attribute ``NAME`` of that
module (an :class:`~.base.Op`, e.g. made by :func:`kcontract.define_op`), or else the op
of that module whose name is ``NAME``.  A loaded user op is registered under its name
for the rest of the process (reports, recordings; the one loaded last answers to a name
two of them share); it may not take a built-in op's name.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from typing import Optional, Union

from ..errors import UsageError, did_you_mean
from .base import Op

ENTRY_POINT_GROUP = "kcontract.ops"

BUILTIN: dict[str, Op] = {}
USER: dict[str, Op] = {}


def register_builtin(op: Op) -> None:
    BUILTIN[op.name] = op


def register(op: Op) -> Op:
    """Make a user-defined op known by its name (idempotent for the same op)."""
    if not isinstance(op, Op):
        raise UsageError(f"not an op: {op!r} (define one with kcontract.define_op)")
    if op.name in BUILTIN and BUILTIN[op.name] is not op:
        raise UsageError(f"a user-defined op may not take the built-in op name {op.name!r}")
    USER[op.name] = op  # the op loaded last answers to its name
    return op


def _entry_points():
    from importlib.metadata import entry_points
    try:
        return list(entry_points(group=ENTRY_POINT_GROUP))
    except TypeError:  # pragma: no cover - Python < 3.10
        return list(entry_points().get(ENTRY_POINT_GROUP, []))


def _from_entry_point(name: str) -> Optional[Op]:
    for ep in _entry_points():
        if ep.name == name:
            try:
                obj = ep.load()
            except Exception as exc:
                raise UsageError(f"the op {name!r} of entry point {ep.value} does not load: "
                                 f"{type(exc).__name__}: {exc}") from None
            op = obj() if callable(obj) and not isinstance(obj, Op) else obj
            if not isinstance(op, Op):
                raise UsageError(f"entry point {ENTRY_POINT_GROUP}:{name} ({ep.value}) is not an "
                                 f"op (got {type(op).__name__})")
            op.origin = op.origin or ep.value
            return register(op)
    return None


def known_names() -> list[str]:
    """Every op name that resolves: built-in, loaded user ops, entry points."""
    names = list(BUILTIN) + [n for n in USER if n not in BUILTIN]
    names += [ep.name for ep in _entry_points() if ep.name not in names]
    return names


def is_spec(text: str) -> bool:
    return ":" in text


def _load_module(path_part: str, base: Optional[str]):
    if path_part.endswith(".py"):
        path = path_part if os.path.isabs(path_part) else os.path.join(base or os.getcwd(),
                                                                      path_part)
        path = os.path.abspath(path)
        if not os.path.isfile(path):
            raise UsageError(f"op file {path_part!r} not found"
                             + (f" (relative to {base})" if base else ""))
        modname = "kcontract_user_ops_" + hashlib.sha1(path.encode()).hexdigest()[:12]
        if modname in sys.modules:
            return sys.modules[modname], path
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        folder = os.path.dirname(path)
        added = folder not in sys.path
        if added:
            sys.path.insert(0, folder)
        try:
            sys.modules[modname] = mod
            spec.loader.exec_module(mod)
        except Exception as exc:
            sys.modules.pop(modname, None)
            raise UsageError(f"op file {path} does not import: {type(exc).__name__}: {exc}") \
                from None
        finally:
            if added:
                sys.path.remove(folder)
        return mod, path
    try:
        return importlib.import_module(path_part), path_part
    except ImportError as exc:
        raise UsageError(f"op module {path_part!r} does not import: {exc}") from None


def resolve_spec(spec: str, base: Optional[str] = None) -> Op:
    """The op a spec ``file.py:NAME`` / ``module:NAME`` names (see the module docstring)."""
    path_part, _, attr = spec.rpartition(":")
    if not path_part or not attr:
        raise UsageError(f"op spec {spec!r} must be path/to/ops.py:NAME or module:NAME")
    mod, where = _load_module(path_part, base)
    obj = getattr(mod, attr, None)
    if not isinstance(obj, Op):
        found = [v for v in vars(mod).values() if isinstance(v, Op) and v.name == attr]
        obj = found[0] if found else None
    if obj is None:
        names = sorted({k for k, v in vars(mod).items() if isinstance(v, Op)}
                       | {v.name for v in vars(mod).values() if isinstance(v, Op)})
        raise UsageError(f"{where} defines no op {attr!r}{did_you_mean(attr, names)}"
                         + (f"; its ops: {', '.join(names)}" if names else
                            " (define one with kcontract.define_op)"))
    if not getattr(obj, "origin", None):
        obj.origin = f"{where}:{attr}" if where.endswith(".py") else spec
    return register(obj)


def get_op(op: Union[str, Op], base: Optional[str] = None) -> Op:
    """The op named by ``op``: an :class:`Op` (registered and returned), a name, or a spec."""
    if isinstance(op, Op):
        return op if op.name in BUILTIN and BUILTIN[op.name] is op else register(op)
    if not isinstance(op, str) or not op:
        raise UsageError(f"an op is a name or a spec path/to/ops.py:NAME, not {op!r}")
    if op in BUILTIN:
        return BUILTIN[op]
    if op in USER:
        return USER[op]
    if is_spec(op):
        return resolve_spec(op, base)
    found = _from_entry_point(op)
    if found is not None:
        return found
    names = known_names()
    raise UsageError(f"unknown op {op!r}{did_you_mean(op, names)}; known: {', '.join(names)} "
                     f"(or a user-defined op: path/to/ops.py:NAME or module:NAME)")


def op_reference(op: Op) -> str:
    """How a command line names ``op``: its name if built in, else where it came from."""
    if op.name in BUILTIN:
        return op.name
    return getattr(op, "origin", None) or op.name
