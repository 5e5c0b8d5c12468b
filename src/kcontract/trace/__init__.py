"""Whole-model traces: record every aten op of a model's forward pass on a stack, check
the distinct ops against the suite at the model's real shapes, and compare two traces
of the same model to find the op where two platforms part and whose contract breaks.

* :func:`trace_model` (``kcontract trace``) -- run a KernelBench-format model in the
  trace worker under a prelude (:mod:`.worker`, :mod:`.recorder`); a :class:`Trace`
  (``.kct``, :mod:`.kct`).
* :func:`coverage` -- which kcontract op each recorded aten op is (:mod:`.coverage`).
* :func:`check_trace` (``kcontract trace --check``) -- the suite at the model's shapes,
  the recorded inputs as an extra input family (:mod:`.check`).
* :func:`compare_traces` (``kcontract compare-traces``) -- agreement, the first op
  where the runs part, divergence growth, and a three-way arbitration of each diverging
  op against the float64 oracle (:mod:`.compare`, :mod:`.judge`).
"""
from .coverage import TABLE, coverage
from .kct import KCT_SCHEMA, Trace, Trial
from .process import trace_model

__all__ = ["TABLE", "coverage", "KCT_SCHEMA", "Trace", "Trial", "trace_model",
           "compare_traces", "check_trace"]


def compare_traces(a, b, **kw):
    from .compare import compare_traces as _compare
    return _compare(a, b, **kw)


def check_trace(trace, **kw):
    from .check import check_trace as _check
    return _check(trace, **kw)
