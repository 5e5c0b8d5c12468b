"""Shrinking a KernelBench problem's sizes consistently (``--scale F``, ``--max-elements N``).

A problem's sizes are module-level integer literals: ``batch_size = 16``, and the
integers inside a literal tuple, ``input_shape = (128, 4096)``.  Other module-level
values are often derived from them at import (``dim = input_shape[-1]``,
``features = 4 * hidden``), so the sizes are not patched into the loaded module: the
file's source is rewritten, literal by literal, and executed again, and every derived
value follows.

A literal is a size when it is at least :data:`MIN_SIZE` (smaller ones are dims, kernel
sizes, strides, head counts: left alone).  A size ``v`` becomes ``max(g, round(v*F/g)*g)``
with ``g`` the largest power of two dividing ``v``, capped at 16 and at half the scaled
size: a size that was a multiple of 8 stays one where it stays large enough, so group
counts still divide channel counts and a tile-sized dimension stays tile-sized.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Optional

#: literals at least this large are sizes (smaller ones are dims, kernel sizes, strides)
MIN_SIZE = 8
#: the most the power-of-two alignment of a size keeps
MAX_ALIGN = 16


@dataclass(frozen=True)
class SizeLiteral:
    """One integer literal of the problem's source that is a size."""

    name: str
    index: Optional[int]  # the position inside a tuple literal, or None
    value: int
    line: int
    col: int
    end_col: int

    @property
    def label(self) -> str:
        return self.name if self.index is None else f"{self.name}[{self.index}]"


@dataclass
class Scaling:
    """How a problem was shrunk: the factor and every size, as written and as used."""

    factor: float = 1.0
    max_elements: Optional[int] = None
    sizes: dict = field(default_factory=dict)  # label -> (written, used)

    @property
    def reduced(self) -> bool:
        return any(used != written for written, used in self.sizes.values())

    def describe(self) -> str:
        changed = [f"{k} {a}->{b}" for k, (a, b) in self.sizes.items() if a != b]
        how = (f"--max-elements {self.max_elements} (scale {self.factor:.3g})"
               if self.max_elements else f"--scale {self.factor:g}")
        return (f"checked at a reduced size ({how}): {', '.join(changed)}" if changed
                else "checked at the problem's own sizes")

    def as_dict(self) -> dict:
        return {"factor": self.factor, "max_elements": self.max_elements,
                "reduced": self.reduced,
                "sizes": {k: {"written": a, "used": b} for k, (a, b) in self.sizes.items()}}


def size_literals(source: str) -> list[SizeLiteral]:
    """The size literals of a problem's module-level assignments, in source order."""
    out = []
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            continue
        name, value = node.targets[0].id, node.value
        if name.startswith("_"):
            continue
        items = [(None, value)] if isinstance(value, ast.Constant) else (
            list(enumerate(value.elts)) if isinstance(value, (ast.Tuple, ast.List)) else [])
        for index, item in items:
            if (isinstance(item, ast.Constant) and type(item.value) is int
                    and item.value >= MIN_SIZE and item.lineno == item.end_lineno):
                out.append(SizeLiteral(name, index, item.value, item.lineno, item.col_offset,
                                       item.end_col_offset))
    return out


def scaled_value(value: int, factor: float) -> int:
    align = 1
    while (value % (align * 2) == 0 and align * 2 <= MAX_ALIGN
           and align * 2 <= value * factor / 2):
        align *= 2
    return max(align, int(round(value * factor / align)) * align)


def rewritten(source: str, values: dict) -> str:
    """The source with the size literals named in ``values`` (label -> int) replaced."""
    lines = source.splitlines(keepends=True)
    # right to left within a line, so earlier columns stay valid
    for lit in sorted(size_literals(source), key=lambda s: (s.line, -s.col)):
        if lit.label in values:
            row = lines[lit.line - 1]
            lines[lit.line - 1] = row[:lit.col] + str(int(values[lit.label])) + row[lit.end_col:]
    return "".join(lines)


def scaled_source(source: str, factor: float) -> tuple[str, dict]:
    """The source with every size literal scaled, and ``{label: (written, used)}``."""
    sizes = {lit.label: (lit.value, scaled_value(lit.value, factor) if factor != 1.0
                         else lit.value) for lit in size_literals(source)}
    return rewritten(source, {k: b for k, (_, b) in sizes.items()}), sizes


def exec_source(path: str, source: str) -> types.ModuleType:
    """The problem file's (rewritten) source as a module of its own, loaded the way
    :func:`kcontract.check.worker.load_module_file` loads the file (its folder importable)."""
    path = os.path.abspath(path)
    digest = hashlib.sha1((path + source).encode()).hexdigest()[:10]
    name = "kcontract_problem_" + digest
    spec = importlib.util.spec_from_loader(name, loader=None, origin=path)
    module = importlib.util.module_from_spec(spec)
    module.__file__ = path
    sys.modules[name] = module
    if os.path.dirname(path) not in sys.path:
        sys.path.insert(0, os.path.dirname(path))
    try:
        exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - trusted problem
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def largest_input(module: types.ModuleType) -> int:
    """Elements of the largest tensor ``get_inputs()`` and ``Model(*get_init_inputs())``
    hold, measured on the meta device (nothing is allocated)."""
    import torch
    with torch.device("meta"):
        inputs = list(module.get_inputs())
        model = module.Model(*module.get_init_inputs())
    sizes = [x.numel() for x in inputs if isinstance(x, torch.Tensor)]
    if isinstance(model, torch.nn.Module):
        sizes += [p.numel() for p in model.parameters()]
    return max(sizes or [0])


def factor_for(path: str, source: str, max_elements: int) -> float:
    """The largest scale (1 at most) at which no input or weight exceeds ``max_elements``."""
    def fits(f: float) -> bool:
        return largest_input(exec_source(path, scaled_source(source, f)[0])) <= max_elements
    if fits(1.0):
        return 1.0
    lo, hi = 1.0 / 1024, 1.0
    if not fits(lo):
        return lo
    for _ in range(12):  # bisection on the factor (sizes change in steps)
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


__all__ = ["MIN_SIZE", "Scaling", "SizeLiteral", "exec_source", "factor_for", "largest_input",
           "rewritten", "scaled_source", "scaled_value", "size_literals"]
