"""pytest plugin: the ``kcontract_check`` fixture and the ``kcontract`` marker.

Registered through the ``pytest11`` entry point, so installing kcontract is
enough.  At load it imports nothing but pytest and the standard library; the
checker, numpy and any framework load on the first check.

A test reads::

    def test_my_matmul(kcontract_check):
        kcontract_check(my_kernel, op="matmul", dtype="bfloat16",
                        declare={"accumulate": "float32"})

``op`` is a built-in op's name, a user-defined op (``kcontract.define_op``, or a spec
``ops.py:NAME`` / ``module:NAME``), for which the suite's generic contracts run.  The
test fails with the violation (contract, case, worst element, measured against
allowed, tolerance, reproduce line) when a contract breaks.  A marker supplies
defaults for a test or a whole module::

    pytestmark = pytest.mark.kcontract(op="matmul", dtype="float32")

    def test_it(kcontract_check):
        kcontract_check(my_kernel)

Kernels are checked in an isolated worker process.  A function object is
resolved to ``module:qualname`` (with its import root) or ``file.py:name``; one
the worker cannot import (a lambda, a closure, a callable object) runs in this
process, without isolation, and the check says so (a ``KcontractWarning``).

Options: ``--kcontract-classes`` (select classes or contract ids),
``--kcontract-report PATH`` (``.json``: every run; ``.md``: a Markdown summary;
otherwise a folder of HTML reports), ``--kcontract-seed N|random``,
``--kcontract-timeout``, ``--kcontract-in-process``.
"""
from __future__ import annotations

import inspect
import os
import sys
import warnings
from typing import Any, Callable, Mapping, Optional, Sequence

import pytest

from ..errors import UsageError


class KcontractWarning(UserWarning):
    """A check ran with less than the usual isolation (or another caveat)."""


# -- options and markers -----------------------------------------------------------------
def pytest_addoption(parser):
    group = parser.getgroup("kcontract", "kcontract: numerical contracts for kernels")
    group.addoption("--kcontract-classes", action="append", default=[], metavar="IDS",
                    help="check only these contract classes or contract ids (comma-separated, "
                         "repeatable); classes= in a call or a kcontract marker wins")
    group.addoption("--kcontract-report", metavar="PATH", default=None,
                    help="write the session's checks: PATH.json (every run), PATH.md (a "
                         "Markdown summary) or a folder of self-contained HTML reports")
    group.addoption("--kcontract-seed", metavar="N|random", default="0",
                    help="seed added to every contract's seeds; 'random' draws a secret one "
                         "per session (printed with failures)")
    group.addoption("--kcontract-timeout", type=float, default=60.0, metavar="SECONDS",
                    help="seconds allowed per kernel call")
    group.addoption("--kcontract-in-process", action="store_true", default=False,
                    help="run kernels in the test process (debugging; no isolation)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "kcontract(op=None, dtype=None, declare=None, classes=None, framework=None, "
                   "device=None): defaults for the kcontract_check fixture")
    config.stash[_SESSION] = _Session(config)


class _Session:
    """Every check run in this pytest session, for the report and the summary."""

    def __init__(self, config):
        self.config = config
        #: every run as JSON with its test id (those of xdist workers included)
        self.entries: list[dict] = []
        raw = str(config.getoption("kcontract_seed", "0") or "0")
        if raw == "random":
            import secrets
            self.seed = secrets.randbelow(2 ** 31)
            self.secret = True
        else:
            try:
                self.seed = int(raw)
            except ValueError:
                raise pytest.UsageError(f"--kcontract-seed must be an integer or 'random', "
                                        f"not {raw!r}")
            self.secret = False
        self.classes = [c.strip() for item in config.getoption("kcontract_classes", []) or []
                        for c in item.split(",") if c.strip()]


_SESSION = pytest.StashKey[_Session]()


# -- the fixture ---------------------------------------------------------------------------
@pytest.fixture
def kcontract_check(request) -> "Checker":
    """``kcontract_check(kernel, op=..., dtype=..., declare=..., classes=...)``: check a
    kernel against the suite; fails the test with the violation when a contract
    breaks, returns the run (a :class:`kcontract.check.verdict.RunResult`)."""
    defaults: dict = {}
    for marker in reversed(list(request.node.iter_markers("kcontract"))):
        defaults.update(marker.kwargs)  # the closest marker wins
    return Checker(request.config.stash[_SESSION], defaults, request.node.nodeid)


class Checker:
    """The callable the fixture returns."""

    def __init__(self, session: _Session, defaults: Mapping[str, Any], nodeid: str):
        self.session = session
        self.defaults = dict(defaults)
        self.nodeid = nodeid

    def __call__(self, kernel, op: Optional[str] = None, dtype: Optional[str] = None, *,
                 declare: Optional[Mapping[str, Any]] = None,
                 classes: Optional[Sequence[str]] = None, framework: Optional[str] = None,
                 device: Optional[str] = None, seed: Optional[int] = None,
                 timeout: Optional[float] = None, contracts=None, in_process: Optional[bool] = None,
                 fail: bool = True):
        opts = dict(self.defaults)
        given = {"op": op, "dtype": dtype, "declare": declare, "classes": classes,
                 "framework": framework, "device": device, "seed": seed, "timeout": timeout,
                 "in_process": in_process}
        opts.update({k: v for k, v in given.items() if v is not None})
        if not opts.get("op") or not opts.get("dtype"):
            raise UsageError("kcontract_check needs op= and dtype= (or a "
                             "@pytest.mark.kcontract(op=..., dtype=...) marker)")
        config = self.session.config
        if isinstance(opts.get("classes"), str):
            opts["classes"] = [opts["classes"]]
        chosen = list(opts.get("classes") or self.session.classes) or None
        target = resolve(kernel, opts.get("framework"))
        framework = opts.get("framework") or target.framework
        forced = bool(opts.get("in_process") or config.getoption("kcontract_in_process", False))
        if target.note:
            warnings.warn(KcontractWarning(target.note), stacklevel=2)
        run = _run(target, op=opts["op"], dtype=opts["dtype"], framework=framework,
                   device=opts.get("device") or "cpu", classes=chosen,
                   declare=dict(opts.get("declare") or {}),
                   seed=int(opts["seed"]) if opts.get("seed") is not None else self.session.seed,
                   timeout=float(opts.get("timeout") or config.getoption("kcontract_timeout", 60.0)),
                   contracts=contracts, in_process=forced)
        self.session.entries.append(dict(run.to_json(), test=self.nodeid))
        if fail and run.verdict != "conformant":
            pytest.fail(failure_message(run, target, self.session), pytrace=False)
        why = run.nothing_checked()
        if fail and why is not None:
            pytest.fail(f"kcontract: nothing was checked for {target.spec} (op={opts['op']} "
                        f"dtype={opts['dtype']}): every selected contract was skipped ({why})",
                        pytrace=False)
        return run


# -- kernels as the worker can import them ------------------------------------------------------
class Target:
    """How the worker finds a kernel: ``spec`` (what it imports), ``paths`` (import
    roots it needs), ``fn`` (set when only this process can call it), a ``note``."""

    def __init__(self, spec: str, *, paths: Sequence[str] = (), fn: Optional[Callable] = None,
                 note: str = "", framework: str = "numpy", display: str = ""):
        self.spec, self.paths, self.fn, self.note = spec, list(paths), fn, note
        self.framework = framework
        self.display = display or spec


def resolve(kernel, framework: Optional[str] = None) -> Target:
    """A kernel spec string, or a function object, as a :class:`Target`."""
    if isinstance(kernel, str):
        return Target(kernel, framework=framework or "numpy")
    if not callable(kernel):
        raise UsageError(f"kcontract_check needs a kernel function or 'file.py:function', "
                         f"not {type(kernel).__name__}")
    guess = framework or _guess_framework(kernel)
    qualname = getattr(kernel, "__qualname__", None) or ""
    modname = getattr(kernel, "__module__", None) or ""
    module = sys.modules.get(modname)
    label = f"{modname}:{qualname}" if qualname else repr(kernel)
    why = None
    if not inspect.isfunction(kernel) and not inspect.isbuiltin(kernel):
        why = "it is a callable object, not a function"
    elif "<lambda>" in qualname or "<locals>" in qualname:
        why = "it is a lambda or a closure"
    elif module is None or _walk(module, qualname) is not kernel:
        why = f"{label} does not name it (decorated or reassigned?)"
    file = getattr(module, "__file__", None) if module is not None else None
    if why is None and not file:
        why = f"its module {modname} has no file"
    if why is not None:
        return Target(label, fn=kernel, framework=guess, display=label,
                      note=f"kcontract: {label} is checked in this process, without isolation: "
                           f"{why}, so the isolated worker cannot import it")
    file = os.path.abspath(file)
    rel = os.path.relpath(file)
    display = f"{rel}:{qualname}"
    root = _import_root(file, modname)
    if root is not None and modname != "__main__":
        return Target(f"{modname}:{qualname}", paths=[root], framework=guess, display=display)
    return Target(f"{file}:{qualname}", framework=guess, display=display)


def _walk(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _import_root(file: str, modname: str) -> Optional[str]:
    """The sys.path entry from which ``import modname`` finds ``file``, if the
    path and the name agree (``a/b/c.py`` for ``a.b.c``)."""
    if not modname or modname == "__main__":
        return None
    parts = modname.split(".")
    stem, _ = os.path.splitext(file)
    if os.path.basename(stem) == "__init__":
        stem = os.path.dirname(stem)
    tail = stem.split(os.sep)[-len(parts):]
    if tail != parts:
        return None
    root = stem
    for _ in parts:
        root = os.path.dirname(root)
    return root


def _guess_framework(fn) -> str:
    """torch if the function's code uses a torch module global, else numpy."""
    code = getattr(fn, "__code__", None)
    glb = getattr(fn, "__globals__", {}) or {}
    names = set(code.co_names) if code is not None else set()
    for name in names:
        value = glb.get(name)
        mod = getattr(value, "__name__", "") if inspect.ismodule(value) else \
            getattr(value, "__module__", "") or ""
        if mod == "torch" or mod.startswith("torch."):
            return "torch"
    return "numpy"


def _run(target: Target, *, op, dtype, framework, device, classes, declare, seed, timeout,
         contracts, in_process):
    from ..check.runner import check
    from ..check.sandbox import InProcessKernel, KernelProcess
    repro = _reproduce(target, op, dtype, framework, device, declare)
    kw = dict(op=op, dtype=dtype, framework=framework, device=device, classes=classes,
              declare=declare, seed=seed, timeout=timeout, contracts=contracts,
              reproduce_prefix=repro, hints=True)  # the diagnosis a check command gives
    if target.fn is not None:
        handle = _callable_handle(target, framework, device, timeout)
        return check(target.display, handle=handle, **kw)
    if in_process:
        handle = InProcessKernel(target.spec, framework=framework, device=device, paths=target.paths)
    else:
        handle = KernelProcess(target.spec, framework=framework, device=device, timeout=timeout,
                               paths=target.paths)
    try:
        from ..check.sandbox import KernelLoadError
        try:
            handle.start()
        except KernelLoadError as exc:
            return _load_error(target, exc, kw)
        return check(target.display, handle=handle, **kw)
    finally:
        handle.close()


def _load_error(target: Target, exc: Exception, kw: dict):
    """The run of a kernel that does not import: an ``error`` verdict per contract."""
    from .. import __version__
    from ..check.runner import select_contracts
    from ..check.verdict import ContractResult, RunResult, Status
    from ..language.claims import make_claims
    from ..formats import get_format
    run = RunResult(kernel=target.display, op=getattr(kw["op"], "name", kw["op"]), dtype=get_format(kw["dtype"]).name,
                    framework=kw["framework"], device=kw["device"],
                    claims=make_claims(get_format(kw["dtype"]), kw["declare"]).as_dict(),
                    environment={}, suite_version=__version__)
    for c in select_contracts(kw["op"], run.dtype, kw["framework"], kw["classes"],
                              kw["contracts"]):
        run.results.append(ContractResult(contract=c.cls, id=c.id, verdict=Status.ERROR,
                                          message=str(exc), signature={"code": "kernel.load"}))
    return run


def _callable_handle(target: Target, framework: str, device: str, timeout: float):
    """An in-process handle around a function object the worker cannot import."""
    from ..adapters import get_adapter
    from ..check.sandbox import InProcessKernel
    from ..check.worker import _snapshot_numpy
    handle = InProcessKernel(target.spec, framework=framework, device=device, timeout=timeout)
    w = handle.worker
    w.adapter = get_adapter(framework)
    w.device = device
    w.fn = target.fn
    w.base_state = w._state()
    w.numpy_ids = _snapshot_numpy()
    try:
        params = inspect.signature(target.fn).parameters
        accepts = list(params)
        var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        accepts, var_kw = [], True
    handle.info = {"module": getattr(target.fn, "__module__", ""), "file": "",
                   "source_sha256": "", "accepts": accepts, "var_kw": var_kw, "configs": None}
    return handle


def _reproduce(target: Target, op, dtype, framework, device, declare) -> str:
    import shlex
    if not isinstance(op, str):  # an op object (kcontract.define_op): where it came from
        from ..ops import get_op, op_reference
        op = op_reference(get_op(op))
    if target.fn is not None:
        spec = target.display
    else:
        spec = target.display if ":" in target.display else target.spec
    parts = ["kcontract", "check", spec, "--op", op, "--dtype", dtype]
    if framework != "numpy":
        parts += ["--framework", framework]
    if device not in ("cpu", ""):
        parts += ["--device", device]
    for k, v in (declare or {}).items():
        parts += ["--declare", f"{k}={_claim_text(v)}"]
    return " ".join(shlex.quote(p) for p in parts)


def _claim_text(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


# -- messages and reports -------------------------------------------------------------------------
def failure_message(run, target: Target, session: _Session) -> str:
    from ..diagnosis.text import cause_lines
    data = run.to_json()
    bad = [r for r in data["results"] if r["verdict"] in ("violation", "error")]
    what = "breaks" if run.verdict == "violation" else "errors on"
    causes = len((data.get("diagnosis") or {}).get("primary") or [])
    lines = [f"kcontract: {target.display} {what} {len(bad)} contract"
             f"{'s' if len(bad) != 1 else ''} (op={run.op} dtype={run.dtype} "
             f"framework={run.framework} device={run.device}): {causes} primary cause"
             f"{'s' if causes != 1 else ''}"]
    for kind, line in cause_lines(data):
        if kind in ("violation", "error"):
            lines.append("")
        lines.append(line)
    if target.fn is not None:
        lines += ["", target.note]
    if session.secret:
        lines += ["", f"secret seed of this session: {session.seed} "
                      f"(rerun with --kcontract-seed {session.seed})"]
    return "\n".join(lines)


def pytest_sessionfinish(session):
    """An xdist worker hands its runs to the controller (see pytest_testnodedown)."""
    config = session.config
    own = config.stash.get(_SESSION, None)
    if own is not None and hasattr(config, "workeroutput"):
        config.workeroutput["kcontract_runs"] = own.entries


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    own = node.config.stash.get(_SESSION, None)
    if own is not None:
        own.entries.extend(getattr(node, "workeroutput", {}).get("kcontract_runs", []))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    session = config.stash.get(_SESSION, None)
    if session is None or not session.entries:
        return
    counts: dict = {}
    for entry in session.entries:
        counts[entry["verdict"]] = counts.get(entry["verdict"], 0) + 1
    text = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    terminalreporter.write_sep("-", "kcontract")
    n = len(session.entries)
    terminalreporter.write_line(f"{n} kernel check{'s' if n != 1 else ''}: {text}")
    path = config.getoption("kcontract_report", None)
    if path:
        terminalreporter.write_line(f"report: {write_report(path, session.entries)}")


def write_report(path: str, entries: Sequence[dict]) -> str:
    """Write the session's runs (JSON, each with its ``test`` id) to ``path`` (see
    ``--kcontract-report``); returns the path."""
    import json
    entries = sorted(entries, key=lambda e: e["test"])
    folder = os.path.dirname(os.path.abspath(path))
    if path.endswith(".json"):
        os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"schema": "kcontract.pytest/1", "runs": entries}, fh, indent=2)
        return path
    from ..report import render_html, render_markdown
    if path.endswith(".md"):
        os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            for entry in entries:
                fh.write(f"## {entry['test']}\n\n{render_markdown(entry)}\n")
        return path
    os.makedirs(path, exist_ok=True)
    for i, entry in enumerate(entries):
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in entry["test"])
        with open(os.path.join(path, f"{i:03d}-{name[-80:]}.html"), "w", encoding="utf-8") as fh:
            fh.write(render_html(entry))
    with open(os.path.join(path, "runs.json"), "w", encoding="utf-8") as fh:
        json.dump({"schema": "kcontract.pytest/1", "runs": entries}, fh, indent=2)
    return path
