"""Resource limits that hold for a sandboxed worker even when the checker runs as root:
a control group per worker (memory and process count), created by the checker, joined
by the worker before ``exec`` and removed when the worker is closed.

Resource limits set with ``setrlimit`` do not all bind: ``RLIMIT_NPROC`` is ignored for
root (the uid the sandbox's ``nobody`` maps to, when the checker is root), and
``RLIMIT_AS`` bounds address space, not memory.  A cgroup bounds what the worker and
every process it forks actually use: ``pids.max`` (a fork bomb gets ``EAGAIN``) and the
memory limit (a memory hog is killed by the kernel's OOM killer, inside its cgroup).
The checker reads the cgroup's event counters after each call, so a call that ran into
a limit gets a verdict that says so (``kernel.memory-limit``, ``kernel.process-limit``).

Both layouts are handled per controller: the unified hierarchy (cgroup v2: one folder,
``memory.max`` and ``pids.max``, when the checker's own cgroup can delegate them) and the
legacy one (cgroup v1: a folder in the ``memory`` and in the ``pids`` hierarchy, under
the checker's own cgroup in each).  Where neither is writable (not root, a read-only
``/sys/fs/cgroup``, a v2 cgroup that cannot delegate), the limit is recorded as not
enforced, with the reason, and the checker says so once on stderr.

Configuration (environment): ``KCONTRACT_WORKER_MEMORY`` (bytes, or with a K/M/G/T
suffix; ``none`` for no memory limit; default :data:`MEMORY_SHARE` of the machine's
memory, or of the checker's own cgroup limit when lower), ``KCONTRACT_WORKER_PROCESSES``
(default :data:`DEFAULT_PROCESSES`), ``KCONTRACT_CGROUP=none`` (no cgroups at all).
"""
from __future__ import annotations

import functools
import os
import signal
import sys
import time
import uuid
from typing import NamedTuple, Optional

ENV_MEMORY = "KCONTRACT_WORKER_MEMORY"
ENV_PROCESSES = "KCONTRACT_WORKER_PROCESSES"
ENV_CGROUP = "KCONTRACT_CGROUP"
#: the share of the machine's memory (or of the checker's own cgroup limit) one worker
#: may use: enough for any kernel the suite calls, and room left for the checker
MEMORY_SHARE = 0.75
#: tasks (processes and threads) one worker may have: far more than a framework's
#: thread pools, far fewer than the machine's
DEFAULT_PROCESSES = 4096
CGROUP_ROOT = "/sys/fs/cgroup"
PREFIX = "kcontract-"
_UNLIMITED = 1 << 62  # what a v1 cgroup reports for "no limit" is about this


def parse_size(text: str) -> Optional[int]:
    """``"512M"`` -> 536870912; ``"none"`` -> None.  Raises ValueError for anything else."""
    t = str(text).strip().lower()
    if t in ("none", "off", "unlimited", "max"):
        return None
    mult = 1
    for suffix, m in (("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40)):
        if t.endswith(suffix) or t.endswith(suffix + "b") or t.endswith(suffix + "ib"):
            t = t[:t.rindex(suffix)]
            mult = m
            break
    value = int(float(t) * mult)
    if value <= 0:
        raise ValueError(f"not a positive size: {text!r}")
    return value


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def own_cgroups(pid: str = "self") -> dict:
    """``{controller: path}`` from ``/proc/<pid>/cgroup``; the unified hierarchy as ``""``."""
    out = {}
    for line in _read(f"/proc/{pid}/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            out[""] = path
        for c in controllers.split(","):
            if c:
                out[c] = path
    return out


def _mounts() -> dict:
    """``{"v2": mountpoint, "memory": v1 mountpoint, "pids": v1 mountpoint}`` as mounted."""
    return dict(_mount_table())


@functools.lru_cache(maxsize=None)
def _mount_table() -> tuple:
    """The cgroup mount points, read once (every worker start asks)."""
    out = {}
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        point, fstype, opts = fields[4], rfields[0], rfields[2].split(",")
        if fstype == "cgroup2":
            out.setdefault("v2", point)
        elif fstype == "cgroup":
            for c in ("memory", "pids"):
                if c in opts:
                    out.setdefault(c, point)
    return tuple(out.items())


def machine_memory() -> int:
    """The memory this checker may count on (bytes): the machine's, or its own cgroup's
    limit when that is lower."""
    total = 0
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            total = int(line.split()[1]) * 1024
    limits = [total] if total else []
    mine, mounts = own_cgroups(), _mounts()
    if "memory" in mounts and "memory" in mine:
        v = _read(os.path.join(mounts["memory"], mine["memory"].lstrip("/"),
                               "memory.limit_in_bytes")).strip()
        if v.isdigit() and int(v) < _UNLIMITED:
            limits.append(int(v))
    if "v2" in mounts and "" in mine:
        v = _read(os.path.join(mounts["v2"], mine[""].lstrip("/"), "memory.max")).strip()
        if v.isdigit():
            limits.append(int(v))
    return min(limits) if limits else 0


def configured() -> dict:
    """The limits a worker is to get: ``{"memory": bytes or None, "processes": n or None}``
    (None: no limit asked for).  Raises :class:`~kcontract.errors.UsageError` for a
    malformed setting."""
    from ..errors import UsageError
    out = {}
    raw = os.environ.get(ENV_MEMORY, "").strip()
    try:
        if raw:
            out["memory"] = parse_size(raw)
        else:
            mem = machine_memory()
            out["memory"] = int(mem * MEMORY_SHARE) if mem else None
    except ValueError:
        raise UsageError(f"{ENV_MEMORY} must be a size (bytes, or 512M, 8G) or 'none', "
                         f"not {raw!r}") from None
    raw = os.environ.get(ENV_PROCESSES, "").strip()
    if not raw:
        out["processes"] = DEFAULT_PROCESSES
    elif raw.lower() in ("none", "max", "unlimited"):
        out["processes"] = None
    elif raw.isdigit() and int(raw) > 0:
        out["processes"] = int(raw)
    else:
        raise UsageError(f"{ENV_PROCESSES} must be a positive count or 'none', not {raw!r}")
    return out


class Controller(NamedTuple):
    """Where one limit lives in each cgroup layout, and the counter that says it was hit."""
    hierarchy: str    # the v1 hierarchy
    v1_limit: str
    v2_limit: str
    v1_events: str
    v2_events: str
    key: str          # the events file's counter of hits


CONTROLLERS = {
    "memory": Controller("memory", "memory.limit_in_bytes", "memory.max",
                         "memory.oom_control", "memory.events", "oom_kill"),
    "processes": Controller("pids", "pids.max", "pids.max", "pids.events", "pids.events", "max"),
}


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _counter(path: str, key: str) -> int:
    for line in _read(path).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return 0


_SWEPT: set = set()
_WARNED: set = set()


def _sweep(parent: str) -> None:
    """Remove the cgroups a checker that died without closing its workers left behind
    (empty once bubblewrap died with it); once per folder and process."""
    if parent in _SWEPT:
        return
    _SWEPT.add(parent)
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX):].split("-", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass


class WorkerCgroup:
    """The cgroup(s) of one worker: made with the limits in :func:`configured`, joined by
    the worker before ``exec`` (:attr:`join`), checked from the parent (:meth:`verify`),
    read after each call (:meth:`events`), emptied and removed by :meth:`close`."""

    def __init__(self, limits: Optional[dict] = None, *, quiet: bool = False):
        self.limits = dict(configured() if limits is None else limits)
        self.quiet = quiet
        self.dirs: dict = {}      # controller -> folder
        self.how: dict = {}       # controller -> "cgroup v1" | "cgroup v2"
        self.why: dict = {}       # controller -> why it is not enforced
        self._seen: dict = {}
        if os.environ.get(ENV_CGROUP, "").strip().lower() == "none":
            for c in CONTROLLERS:
                self.why[c] = f"{ENV_CGROUP}=none"
            return
        name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        mounts, mine = _mounts(), own_cgroups()
        wanted = [c for c in CONTROLLERS if self.limits.get(c)]
        for c in CONTROLLERS:
            if not self.limits.get(c):
                self.why[c] = "no limit configured"
        v2 = self._make_v2(mounts, mine, name, wanted)
        for c in wanted:
            if c in self.how:
                continue
            hier = CONTROLLERS[c].hierarchy
            if hier not in mounts or hier not in mine:
                self.why.setdefault(c, f"no {hier} controller mounted (v1) or delegated (v2)")
                continue
            parent = os.path.join(mounts[hier], mine[hier].lstrip("/"))
            path = os.path.join(parent, name)
            try:
                _sweep(parent)
                os.mkdir(path)
                _write(os.path.join(path, CONTROLLERS[c].v1_limit), str(self.limits[c]))
                if c == "memory":  # no swap to escape into, where swap is accounted
                    try:
                        _write(os.path.join(path, "memory.memsw.limit_in_bytes"),
                               str(self.limits[c]))
                    except OSError:
                        pass
            except OSError as exc:
                _rmdir(path)
                self.why.setdefault(c, f"cannot create a {hier} cgroup ({exc.strerror or exc})")
                continue
            self.dirs[c] = path
            self.how[c] = "cgroup v1"
            self.why.pop(c, None)
        if v2 is not None and not any(self.dirs.get(c) == v2 for c in self.dirs):
            _rmdir(v2)
        self._warn()

    def _make_v2(self, mounts, mine, name, wanted) -> Optional[str]:
        if "v2" not in mounts or "" not in mine or not wanted:
            return None
        parent = os.path.join(mounts["v2"], mine[""].lstrip("/"))
        have = set(_read(os.path.join(parent, "cgroup.controllers")).split())
        need = {CONTROLLERS[c].hierarchy for c in wanted} & have
        if not need:
            return None
        enabled = set(_read(os.path.join(parent, "cgroup.subtree_control")).split())
        for ctl in need - enabled:
            try:  # fails (EBUSY) where the checker's own cgroup holds processes
                _write(os.path.join(parent, "cgroup.subtree_control"), f"+{ctl}")
            except OSError:
                pass
        path = os.path.join(parent, name)
        try:
            _sweep(parent)
            os.mkdir(path)
        except OSError:
            return None
        got = set(_read(os.path.join(path, "cgroup.controllers")).split())
        for c in wanted:
            if CONTROLLERS[c].hierarchy not in got:
                continue
            try:
                _write(os.path.join(path, CONTROLLERS[c].v2_limit), str(self.limits[c]))
                if c == "memory":
                    try:
                        _write(os.path.join(path, "memory.swap.max"), "0")
                    except OSError:
                        pass
            except OSError:
                continue
            self.dirs[c] = path
            self.how[c] = "cgroup v2"
        return path

    @property
    def join(self) -> tuple:
        """The ``cgroup.procs`` files the worker writes itself into before ``exec``."""
        return tuple(sorted({os.path.join(d, "cgroup.procs") for d in self.dirs.values()}))

    def verify(self, pid: int) -> None:
        """Check, from this process, that worker ``pid`` is in its cgroups; a controller
        it is not in is recorded as not enforced."""
        theirs = own_cgroups(str(pid))
        mounts = _mounts()
        for c, d in list(self.dirs.items()):
            key = "" if self.how.get(c) == "cgroup v2" else CONTROLLERS[c].hierarchy
            root = mounts.get("v2" if key == "" else key, "")
            where = os.path.join(root, theirs.get(key, "?").lstrip("/")).rstrip("/")
            if where != d.rstrip("/"):
                self.how.pop(c, None)
                self.why[c] = "the worker could not join its cgroup"
        self._seen = self._counters()
        self._warn()

    def _counters(self) -> dict:
        out = {}
        for c, d in self.dirs.items():
            ctl = CONTROLLERS[c]
            events = ctl.v1_events if self.how.get(c) == "cgroup v1" else ctl.v2_events
            out[c] = _counter(os.path.join(d, events), ctl.key)
        return out

    def events(self) -> list:
        """The limits hit since the last look: ``["memory", "processes"]`` or fewer."""
        if not self.dirs:
            return []
        now = self._counters()
        hit = [c for c in now if now[c] > self._seen.get(c, 0)]
        self._seen = now
        return hit

    def record(self) -> dict:
        """What the run records: per limit, its value and what enforces it (or why not)."""
        out = {}
        for c in CONTROLLERS:
            entry = {"limit": self.limits.get(c)}
            if c in self.how:
                entry["enforced"] = self.how[c]
            else:
                entry["enforced"] = "no"
                entry["why"] = self.why.get(c, "not set up")
            out[c] = entry
        return out

    def _warn(self) -> None:
        missing = sorted(c for c in CONTROLLERS if self.limits.get(c) and c not in self.how
                         and c in self.why)
        key = tuple(missing)
        if missing and key not in _WARNED and not self.quiet:
            _WARNED.add(key)
            print("WARNING: kcontract: no cgroup enforces the worker's " + " and ".join(
                f"{c} limit ({self.why[c]})" for c in missing) + ": a kernel that forks or "
                "allocates without bound can exhaust this machine (recorded in the run's "
                "limits)", file=sys.stderr)

    def close(self, timeout: float = 2.0) -> None:
        """Kill whatever is left in the cgroups and remove them."""
        for d in sorted(set(self.dirs.values())):
            kill = os.path.join(d, "cgroup.kill")
            if os.path.exists(kill):
                try:
                    _write(kill, "1")
                except OSError:
                    pass
            deadline = time.monotonic() + timeout
            while True:
                pids = [int(p) for p in _read(os.path.join(d, "cgroup.procs")).split() if p.isdigit()]
                if not pids or time.monotonic() > deadline:
                    break
                for p in pids:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.01)
            _rmdir(d)
        self.dirs = {}


def _rmdir(path: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


_ENFORCEABLE: dict = {}


def enforceable() -> set:
    """The limits a cgroup can enforce here (``{"memory", "processes"}`` or fewer), found
    once by making and removing a probe cgroup."""
    if "v" not in _ENFORCEABLE:
        probe = WorkerCgroup({"memory": 1 << 30, "processes": 64}, quiet=True)
        _ENFORCEABLE["v"] = set(probe.how)
        probe.close()
    return set(_ENFORCEABLE["v"])
