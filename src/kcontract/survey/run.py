"""``survey()``: plan the cells of a backend, run them on an executor, build the matrix."""
from __future__ import annotations

import time
from typing import Callable, Optional, Sequence

from .. import __version__
from ..errors import UsageError, did_you_mean
from .cells import NOT_COVERED, UNSUPPORTED, Cell, CellResult, record, run_cell
from .fanout import Serial
from .matrix import SurveyMatrix
from .table import load_table


def plan(framework: str, device: str = "cpu", ops: Optional[Sequence[str]] = None,
         dtypes: Optional[Sequence[str]] = None, *, classes: Sequence[str] = (), seed: int = 0,
         timeout: float = 60.0, declare: Optional[dict] = None) -> tuple[list[str], list[str], list[Cell], list[CellResult]]:
    """(ops, dtypes, cells to check, cells decided without a check: ops the table does not
    cover, dtypes it does not survey an op at)."""
    from ..adapters import FRAMEWORKS, adapter_class
    from ..classes import CLASSES
    from ..formats import KERNEL_DTYPES, get_format
    from ..ops import OPS
    if framework not in FRAMEWORKS:
        raise UsageError(f"unknown framework {framework!r}{did_you_mean(framework, FRAMEWORKS)}")
    table = load_table(framework)
    devices = adapter_class(framework).DEVICES
    if device.partition(":")[0] not in devices:
        raise UsageError(f"--framework {framework} names its devices {', '.join(devices)}, "
                         f"not {device!r}")
    ops = list(ops or OPS)
    for op in ops:
        if op not in OPS:
            raise UsageError(f"unknown op {op!r}{did_you_mean(op, OPS)}; known: {', '.join(OPS)}")
    if dtypes:
        dtypes = [get_format(d).name for d in dtypes]
        for d in dtypes:
            if d not in KERNEL_DTYPES:
                raise UsageError(f"--dtypes: {d} is not a kernel dtype ({', '.join(KERNEL_DTYPES)})")
    else:
        wanted = {d for op in ops for d in table.dtypes_for(op)}
        dtypes = [d for d in KERNEL_DTYPES if d in wanted]
    for c in classes:
        if c not in CLASSES:
            raise UsageError(f"unknown contract class {c!r}{did_you_mean(c, CLASSES)}")
    cells, decided = [], []
    for op in ops:
        impl = table.get(op)
        for dt in dtypes:
            if impl is None:
                decided.append(CellResult(op, dt, NOT_COVERED))
            elif dt not in table.dtypes_for(op):
                decided.append(CellResult(op, dt, UNSUPPORTED, function=impl.describe()))
            else:
                cells.append(Cell(framework, device, op, dt, seed=seed, timeout=timeout,
                                  classes=tuple(classes),
                                  declare=tuple(sorted((declare or {}).items()))))
    return ops, dtypes, cells, decided


def survey(framework: str, device: str = "cpu", *, ops: Optional[Sequence[str]] = None,
           dtypes: Optional[Sequence[str]] = None, classes: Sequence[str] = (), seed: int = 0,
           timeout: float = 60.0, declare: Optional[dict] = None, executor=None,
           store: Optional[str] = None,
           record_runs: bool = True, progress: Optional[Callable[[CellResult], None]] = None,
           fn: Callable[[Cell], CellResult] = run_cell) -> SurveyMatrix:
    """Check the framework's own implementation of every op (``ops``) at every dtype
    (``dtypes``; default: those its table surveys) against every applicable contract,
    with the default claims or those ``declare`` states (``{"subnormals": "flush"}``).

    ``executor``: :class:`~.fanout.Serial` (default), :class:`~.fanout.Processes` or
    :class:`~.fanout.Ray`.  Each checked cell's run is recorded in the results store
    (``store``; ``None`` the default one) unless ``record_runs`` is false."""
    from ..classes import CLASSES
    t0 = time.perf_counter()
    executor = executor or Serial()
    ops, dtypes, cells, decided = plan(framework, device, ops, dtypes, classes=classes,
                                       seed=seed, timeout=timeout, declare=declare)
    in_worker = record_runs and executor.records_in_worker
    if in_worker:
        from dataclasses import replace
        cells = [replace(c, store=store or "") for c in cells]
    m = SurveyMatrix(framework=framework, device=device, ops=ops, dtypes=dtypes,
                     classes=list(classes or CLASSES), executor=executor.describe(),
                     suite_version=__version__)
    for res in decided:
        m.cells[res.key] = res
    for res in executor.run(cells, fn):
        if record_runs and not in_worker and res.run is not None and res.run_id is None:
            res.run_id = record(res.run, store)
        if res.run is not None and not m.environment:
            m.environment = dict(res.run.get("environment") or {})
        m.cells[res.key] = res
        if progress:
            progress(res)
    missing = [c for c in cells if c.key not in m.cells]
    if missing:  # an executor bug: say so instead of returning a smaller matrix
        from ..errors import CheckerError
        raise CheckerError(f"the survey lost {len(missing)} cell(s) without a report: "
                           f"{', '.join(f'{c.op}/{c.dtype}' for c in missing)}")
    m.seconds = time.perf_counter() - t0
    return m
