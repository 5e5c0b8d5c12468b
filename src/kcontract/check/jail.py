"""The operating-system sandbox a worker runs in (bubblewrap), and its resource limits.

A worker started through :meth:`Sandbox.command` runs under ``bwrap`` with:

- its own PID namespace (``--unshare-pid``; bubblewrap is its init, and
  ``--die-with-parent``): every descendant, double-forked and ``setsid`` included,
  dies with it, and the checker's processes are not even visible (no
  ``/proc/<ppid>/mem``, no signals, no ``prlimit`` on the checker);
- no network (``--unshare-net``), no IPC, UTS or cgroup namespace shared;
- a user namespace with uid/gid 65534 (``nobody``) and no capabilities;
- the whole filesystem read-only (``--ro-bind / /``): the kernel cannot write the
  results store, the run's JSON, a ``__pycache__``, a ``.pth`` file, a problem file or
  kcontract's own source; a private, empty scratch directory (``$TMPDIR``) is the only
  writable place besides a private ``/dev/shm``; the folder holding the signing key is
  hidden behind an empty tmpfs;
- resource limits set before ``exec`` (address space, CPU seconds, open files, processes,
  core dumps off), on top of the per-call deadline the parent enforces, and a control
  group of its own (:mod:`.limits`: memory and process count, which hold for root too)
  joined before ``exec`` where the checker can create one.

Where bubblewrap is not installed (or ``KCONTRACT_SANDBOX=none``), workers run as plain
child processes in their own session; runs and certificates then record
``sandbox: none`` and certification above level 1 needs an explicit override.
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from typing import Optional

ENV_VAR = "KCONTRACT_SANDBOX"
#: limits a sandboxed worker gets (seconds, counts); generous for real kernels, finite
#: for a kernel that tries to take the machine down.  Memory and the process count come
#: from :func:`.limits.configured` (a share of this machine's memory), and are enforced by
#: a cgroup where one can be made (``RLIMIT_NPROC`` does not bind root)
CPU_SECONDS = 3600
OPEN_FILES = 1024
UID = GID = 65534


class SandboxWarning(UserWarning):
    """The worker runs without an operating-system sandbox."""


@dataclass(frozen=True)
class Sandbox:
    """How workers are started: ``bubblewrap`` or ``none``."""

    name: str
    binary: str = ""

    @property
    def isolated(self) -> bool:
        return self.name != "none"

    def command(self, argv: list, *, scratch: str, device: str = "cpu",
                hide: tuple = ()) -> list:
        """``argv`` wrapped for this sandbox (unchanged for ``none``)."""
        if not self.isolated:
            return list(argv)
        cmd = [self.binary, "--unshare-all", "--unshare-user", "--uid", str(UID), "--gid",
               str(GID), "--die-with-parent", "--new-session", "--cap-drop", "ALL",
               "--ro-bind", "/", "/", "--proc", "/proc"]
        if not accelerator(device):
            cmd += ["--dev", "/dev"]
        else:  # an accelerator needs its device nodes
            cmd += ["--dev-bind", "/dev", "/dev"]
        cmd += ["--tmpfs", "/dev/shm", "--bind", scratch, scratch]
        for folder in hide:
            if folder and os.path.isdir(folder) and os.path.abspath(folder) != "/":
                cmd += ["--tmpfs", os.path.abspath(folder)]
        cmd += ["--chdir", os.getcwd(), "--setenv", "TMPDIR", scratch, "--setenv", "HOME",
                scratch, "--"]
        return cmd + list(argv)

    def preexec(self, device: str = "cpu", *, join: tuple = (), memory: Optional[int] = None,
                memory_by_cgroup: bool = False, processes: Optional[int] = None):
        """A function run in the child before ``exec``: join the worker's cgroups (the
        ``cgroup.procs`` files in ``join``; the parent checks afterwards that it did) and
        set the resource limits.  ``memory``: the worker's memory limit in bytes (None:
        none), as an address-space limit where :func:`address_limit` gives one;
        ``processes``: ``RLIMIT_NPROC`` (which binds every user but root)."""
        if not self.isolated:
            return None
        address = address_limit(device, memory, memory_by_cgroup)
        procs = [p.encode() for p in join]

        def limit():
            for path in procs:
                try:
                    fd = os.open(path, os.O_WRONLY)
                    try:
                        os.write(fd, b"0")
                    finally:
                        os.close(fd)
                except OSError:
                    pass
            _set(resource.RLIMIT_CORE, 0)
            _set(resource.RLIMIT_NOFILE, OPEN_FILES)
            _set(resource.RLIMIT_CPU, CPU_SECONDS)
            if processes is not None:
                _set(resource.RLIMIT_NPROC, processes)
            if address is not None:
                _set(resource.RLIMIT_AS, address)
        return limit

    def scratch(self) -> tempfile.TemporaryDirectory:
        return tempfile.TemporaryDirectory(prefix="kcontract-scratch-")


def accelerator(device: Optional[str]) -> bool:
    """Whether the worker runs on an accelerator (it needs the device nodes, and its driver
    maps far more address space than it uses)."""
    return device not in ("cpu", "", None)


def address_limit(device: Optional[str], memory: Optional[int],
                  memory_by_cgroup: bool) -> Optional[int]:
    """The worker's address-space limit: the memory limit itself where no cgroup enforces
    one, twice it otherwise (a backstop: address space is not memory); none on an
    accelerator or without a memory limit."""
    if memory is None or accelerator(device):
        return None
    return 2 * memory if memory_by_cgroup else memory


def _set(which: int, value: int) -> None:
    try:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value if hard == resource.RLIM_INFINITY else hard))
    except (ValueError, OSError):  # pragma: no cover - a limit this system refuses
        pass


_DETECTED: dict = {}


def _bwrap_works(binary: str) -> bool:
    try:
        res = subprocess.run([binary, "--unshare-all", "--unshare-user", "--die-with-parent",
                              "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--",
                              sys.executable, "-c", "pass"],
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return res.returncode == 0


def detect(requested: Optional[str] = None) -> Sandbox:
    """The sandbox workers get here: bubblewrap when it is installed and works (namespaces
    allowed), else ``none`` with a loud warning.  ``requested`` (or ``$KCONTRACT_SANDBOX``):
    ``none`` to run without one (debugging, measuring its cost), ``bubblewrap`` to demand
    it (an error when it is unavailable)."""
    want = (requested or os.environ.get(ENV_VAR, "") or "auto").strip().lower()
    if want == "none":
        return Sandbox("none")
    if want not in ("auto", "bubblewrap", "bwrap"):
        from ..errors import UsageError
        raise UsageError(f"{ENV_VAR} must be 'bubblewrap', 'none' or unset, not {want!r}")
    if "bwrap" not in _DETECTED:
        binary = shutil.which("bwrap") or ""
        _DETECTED["bwrap"] = binary if binary and _bwrap_works(binary) else ""
    binary = _DETECTED["bwrap"]
    if binary:
        return Sandbox("bubblewrap", binary)
    if want != "auto":
        from ..errors import UsageError
        raise UsageError("bubblewrap (bwrap) is not installed or cannot create namespaces here")
    if not _DETECTED.get("warned"):
        _DETECTED["warned"] = True
        warnings.warn("kcontract: bubblewrap (bwrap) is not available: kernels run WITHOUT an "
                      "operating-system sandbox (sandbox: none is recorded; install the "
                      "'bubblewrap' package)", SandboxWarning, stacklevel=2)
        print("WARNING: kcontract: no sandbox (bubblewrap missing): the kernel under check can "
              "reach this process and its files; sandbox: none is recorded", file=sys.stderr)
    return Sandbox("none")


def hidden_folders() -> tuple:
    """Folders a sandboxed worker must not see: where the signing key lives."""
    from ..records.signing import key_folder
    return (key_folder(),)
