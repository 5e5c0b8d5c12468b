"""Executors: where the cells of a survey run.

* :class:`Serial` -- one after the other, in this process.
* :class:`Processes` -- ``--workers N`` processes on this machine; the visible devices
  of an accelerator are dealt out among them (:func:`.devices.worker_environments`).
  A pool process that dies takes its cell with it: the cell is run again in a fresh
  pool, up to ``retries`` times, then reported as ``lost``.
* :class:`Ray` -- ``--ray ADDRESS|local``: each cell one Ray task requesting one CPU and
  the resource of its device, so a cluster with different accelerators runs every cell
  where its device is.  A task whose worker or node dies is retried by Ray
  (``max_retries``); one that still fails comes back as ``lost`` with Ray's error.

Every executor yields one :class:`~.cells.CellResult` per cell it was given: a cell is
checked, or it is reported, never silently dropped.  Where the cells run on this machine
(serial, processes) each records its run in the results store itself; from Ray tasks,
which may run on machines that cannot see the store, the results come back and are
recorded here.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from typing import Callable, Iterable, Iterator, Mapping, Optional

from ..errors import ContractError, UsageError
from .cells import LOST, Cell, CellResult, run_cell
from .devices import ray_resources, worker_environments

CellFn = Callable[[Cell], CellResult]


def lost(cell: Cell, error: str, attempts: int) -> CellResult:
    return CellResult(cell.op, cell.dtype, LOST, attempts=attempts,
                      error=error.strip().splitlines()[-1][:500] if error.strip() else "lost")


class Serial:
    name = "serial"
    records_in_worker = True

    def describe(self) -> str:
        return "serial"

    def run(self, cells: Iterable[Cell], fn: CellFn = run_cell) -> Iterator[CellResult]:
        for cell in cells:
            try:
                yield fn(cell)
            except (UsageError, ContractError):
                raise
            except Exception as exc:  # a bug of ours in one cell: report it, keep going
                yield lost(cell, f"{type(exc).__name__}: {exc}", 1)


def _init_worker(envs) -> None:
    # one environment per worker process is queued before the pool starts; a blocking get,
    # since get_nowait can miss an item the parent's feeder thread has not flushed yet (the
    # worker then saw every device: a race seen on a loaded machine)
    try:
        os.environ.update(envs.get(timeout=60))
    except Exception:  # none left (a pool that started more processes): nothing to restrict
        pass


class Processes:
    name = "processes"
    records_in_worker = True

    def __init__(self, workers: int, retries: int = 2):
        if workers < 1:
            raise UsageError(f"--workers must be at least 1, not {workers}")
        self.workers, self.retries = workers, retries

    def describe(self) -> str:
        return f"{self.workers} processes"

    def run(self, cells: Iterable[Cell], fn: CellFn = run_cell) -> Iterator[CellResult]:
        pending = {c: 0 for c in cells}  # cell -> attempts so far
        ctx = mp.get_context("spawn")  # no fork of a process that may hold threads
        while pending:
            device = next(iter(pending)).device
            envs = ctx.Queue()
            for e in worker_environments(device, self.workers):
                envs.put(e)
            broken = False
            with ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_init_worker,
                                     initargs=(envs,)) as pool:
                futures = {pool.submit(fn, c): c for c in pending}
                for fut in as_completed(futures):
                    cell = futures[fut]
                    try:
                        res = fut.result()
                    except BrokenProcessPool as exc:
                        broken = True
                        pending[cell] += 1
                        if pending[cell] > self.retries:
                            del pending[cell]
                            yield lost(cell, f"the worker process died ({exc})", self.retries + 1)
                        continue
                    except (UsageError, ContractError):
                        raise
                    except Exception as exc:
                        yield lost(cell, f"{type(exc).__name__}: {exc}", pending.pop(cell) + 1)
                        continue
                    attempts = pending.pop(cell) + 1
                    yield replace(res, attempts=attempts) if attempts > 1 else res
            envs.close()
            if not broken:
                break


def _ray_cell(fn: CellFn, cell: Cell) -> CellResult:
    return fn(cell)  # with its full run: the driver records it


class Ray:
    name = "ray"
    records_in_worker = False

    def __init__(self, address: str = "local", retries: int = 2,
                 resources: Optional[Mapping[str, float]] = None, num_cpus: Optional[int] = None):
        self.address, self.retries = address, retries
        self.resources = dict(resources or {})
        self.num_cpus = num_cpus

    def describe(self) -> str:
        return f"ray ({self.address})"

    def _connect(self):
        try:
            import ray
        except ImportError:
            raise UsageError("--ray needs ray: pip install 'kcontract[ray]'") from None
        if ray.is_initialized():
            return ray, False
        kw = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
        if self.address in ("local", "", None):
            ray.init(num_cpus=self.num_cpus or os.cpu_count(), **kw)
        else:
            ray.init(address=self.address, **kw)
        return ray, True

    def run(self, cells: Iterable[Cell], fn: CellFn = run_cell) -> Iterator[CellResult]:
        cells = list(cells)
        if not cells:
            return
        ray, started = self._connect()
        try:
            yield from self._run(ray, cells, fn)
        finally:
            if started:
                ray.shutdown()

    def _run(self, ray, cells, fn):
        have = ray.cluster_resources()
        task = ray.remote(_ray_cell)
        refs = {}
        for cell in cells:
            opts = ray_resources(cell.device, self.resources)
            want = dict(opts.get("resources") or {})
            if opts.get("num_gpus"):
                want["GPU"] = opts["num_gpus"]
            missing = [k for k, v in want.items() if have.get(k, 0) < v]
            if missing:
                raise UsageError(f"no node of the Ray cluster offers {', '.join(missing)} "
                                 f"(needed by cells on {cell.device}); the cluster has: "
                                 f"{', '.join(sorted(have))}")
            ref = task.options(max_retries=self.retries, retry_exceptions=False,
                               **opts).remote(fn, replace(cell, store=None))
            refs[ref] = cell
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            cell = refs.pop(done[0])
            try:
                yield ray.get(done[0])
            except ray.exceptions.RayTaskError as exc:  # the cell function raised
                cause = getattr(exc, "cause", None)
                if isinstance(cause, (UsageError, ContractError)):
                    raise cause from None
                yield lost(cell, f"{type(cause or exc).__name__}: {cause or exc}", 1)
            except ray.exceptions.RayError as exc:  # worker or node died, retries spent
                yield lost(cell, f"{type(exc).__name__}: {exc}", self.retries + 1)
