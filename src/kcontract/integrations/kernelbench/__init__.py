"""KernelBench-format problems on the check engine: a problem becomes an op
(:mod:`.problem_op`), a candidate ``ModelNew`` runs in its own worker (:mod:`.worker`),
and :func:`check_kernelbench` checks it (:mod:`.check`); :mod:`.scale` shrinks a
problem's sizes (``--scale`` / ``--max-elements``).

The names are imported lazily: the candidate's worker imports this package too, and
needs none of the checker."""
from __future__ import annotations

_EXPORTS = {
    "check": ("KERNELBENCH_TOLERANCE", "KERNELBENCH_TRIALS", "MODULE_CLASSES", "KernelBenchRun",
              "check_kernelbench"),
    "problem_op": ("Problem", "ProblemOp", "Oracle", "load_problem", "shape_variants",
                   "make_inputs"),
    "scale": ("Scaling", "largest_input"),
}


def __getattr__(name: str):
    import importlib
    for module, names in _EXPORTS.items():
        if name in names:
            return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [n for names in _EXPORTS.values() for n in names]
