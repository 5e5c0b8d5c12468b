"""The library's own implementations as kernels: ``kcontract.survey.implementations:jax.sum``
is jax's entry for ``sum`` in its table, bound to kcontract's calling convention.

Resolved in the checker's isolated worker, like any kernel spec; the library is imported
only when one of its ops is first looked up.
"""
from __future__ import annotations

import functools
import importlib

from .table import Implementation, import_dotted, load_table


def bind(impl: Implementation, inputs: tuple[str, ...]):
    """A kernel for ``impl``: the wrapper it names, or its function with the op's inputs
    reordered as ``impl.args`` says and its fixed keyword arguments added."""
    if impl.wrapper:
        module, _, name = impl.wrapper.partition(":")
        return getattr(importlib.import_module(module), name)
    fn = import_dotted(impl.function)
    order = [inputs.index(a) for a in impl.args] if impl.args else None
    fixed = dict(impl.kwargs)

    def kernel(*arrays, **kwargs):
        args = [arrays[i] for i in order] if order else list(arrays)
        return fn(*args, **fixed, **kwargs)
    kernel.__name__ = kernel.__qualname__ = impl.op
    kernel.__doc__ = f"{impl.describe()} in kcontract's calling convention for {impl.op}"
    return kernel


class Framework:
    """``implementations.<framework>``: one attribute per op in the framework's table."""

    def __init__(self, name: str):
        self._name = name
        self._table = load_table(name)

    def __getattr__(self, op: str):
        if op.startswith("_"):
            raise AttributeError(op)
        impl = self._table.get(op)
        if impl is None:
            raise AttributeError(f"the {self._name} table has no entry for op {op!r}")
        from ..ops import get_op
        kernel = bind(impl, tuple(get_op(op).inputs))
        setattr(self, op, kernel)
        return kernel


@functools.lru_cache(maxsize=None)
def __getattr__(name: str):  # PEP 562: implementations.jax, implementations.torch, ...
    if name.startswith("_"):
        raise AttributeError(name)
    from .table import TABLES
    if not (TABLES / f"{name}.yaml").exists():
        raise AttributeError(f"no survey table for framework {name!r}")
    return Framework(name)
