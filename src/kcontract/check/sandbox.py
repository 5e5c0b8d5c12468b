"""The parent side of isolation: a kernel handle that calls into a worker process.

:class:`KernelProcess` keeps one worker alive across calls (imports are paid
once), detects crashes (EOF, signal), hangs (timeout) and state tampering, and
starts a fresh worker after any of them.  :class:`InProcessKernel` has the same
interface and runs the kernel in this process (``--in-process``, for debugging).
"""
from __future__ import annotations

import functools
import hashlib
import io
import mmap
import os
import pickle
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from . import fpstate
from .jail import CPU_SECONDS, OPEN_FILES, Sandbox, address_limit, detect, hidden_folders
from .limits import WorkerCgroup

DEFAULT_TIMEOUT = 60.0
#: the largest reply a worker may send by default (bytes): far above any output the
#: suite asks for, far below what would take the checker's memory down
MAX_REPLY = 256 << 20


#: decoy calls: the length of the burst before a worker's first call (a secret, uniform
#: draw), the chance of one decoy before any later call, and the time a burst may take
DECOY_BURST = (32, 128)
DECOY_RATE = 0.125
DECOY_SECONDS = 0.5
_RNG = random.SystemRandom()
#: flags after which a worker is never reused (the kernel changed its process)
TAMPERING = ("state:", "patched:", "introspect:", "late-write:")
#: statuses of a call that ran into one of the worker's resource limits
LIMIT_STATUSES = ("memory-limit", "process-limit")


def _shuffled(a):
    """``a`` with its elements in a random order (same shape, dtype and values)."""
    if not isinstance(a, np.ndarray) or a.size < 2:
        return a
    flat = np.array(a, copy=True).reshape(-1)
    return np.random.default_rng(_RNG.getrandbits(64)).permutation(flat).reshape(a.shape)


def _differs(fake, args) -> bool:
    """Some shuffled decoy input differs from the real call's."""
    for f, a in zip(fake, args):
        if f is a or not isinstance(a, np.ndarray):
            continue
        try:
            if not np.array_equal(f, a, equal_nan=a.dtype.kind in "fc"):
                return True
        except TypeError:
            return True
    return False


class InputArena:
    """The inputs of a call, handed to the worker in shared memory (a ``memfd``) that the
    kernel's arrays are views of, and read back by the parent after the call: an input
    the kernel wrote to is seen here, by code the kernel cannot reach, whatever the
    worker reports.  One arena per worker; it only grows."""

    ALIGN = 64

    def __init__(self):
        self.fd = os.memfd_create("kcontract-inputs", 0)
        self.size = 0

    def put(self, arrays: list) -> list:
        """Write the ndarray arguments into the arena; their descriptors ``(offset, shape,
        dtype)`` (None for an argument that is not an array)."""
        descs, end = [], 0
        for a in arrays:
            if isinstance(a, np.ndarray) and a.dtype.kind in "biufcV" and not a.dtype.fields:
                off = -(-end // self.ALIGN) * self.ALIGN
                descs.append((off, tuple(a.shape), a.dtype))
                end = off + a.nbytes
            else:
                descs.append(None)
        if end == 0:
            return descs
        if end > self.size:
            self.size = max(end, 2 * self.size)
            os.ftruncate(self.fd, self.size)
        with mmap.mmap(self.fd, end) as mm:
            for a, d in zip(arrays, descs):
                if d is not None and a.nbytes:
                    mm[d[0]:d[0] + a.nbytes] = np.ascontiguousarray(a).tobytes()
        return descs

    def changed(self, arrays: list, descs: list) -> list:
        """Indices of the arguments whose bytes in the arena differ from ``arrays``."""
        ends = [d[0] + a.nbytes for a, d in zip(arrays, descs) if d is not None]
        if not ends or max(ends) == 0:
            return []
        out = []
        with mmap.mmap(self.fd, max(ends), prot=mmap.PROT_READ) as mm:
            for i, (a, d) in enumerate(zip(arrays, descs)):
                if d is not None and a.nbytes and \
                        mm[d[0]:d[0] + a.nbytes] != np.ascontiguousarray(a).tobytes():
                    out.append(i)
        return out

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class FrameTimeout(Exception):
    """The other end did not complete a frame before the deadline."""


class FrameTooLarge(Exception):
    """A frame announced more bytes than the receiver accepts."""


def send_frame(sock: socket.socket, data: bytes, deadline: float) -> None:
    """One frame in :mod:`multiprocessing.connection`'s format (the worker reads it with
    ``Connection.recv``), written before ``deadline`` or :class:`FrameTimeout`."""
    n = len(data)
    header = struct.pack("!i", n) if n <= 0x7FFFFFFF else struct.pack("!iQ", -1, n)
    view = memoryview(header + data) if n < (1 << 16) else None
    for part in ([view] if view is not None else [memoryview(header), memoryview(data)]):
        while len(part):
            left = deadline - time.monotonic()
            if left <= 0:
                raise FrameTimeout()
            _, writable, _ = select.select([], [sock], [], min(left, 0.5))
            if writable:
                try:
                    part = part[sock.send(part):]
                except BlockingIOError:
                    continue


def _read_exact(sock, n: int, deadline: float, alive: Callable[[], bool]) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise FrameTimeout()
        readable, _, _ = select.select([sock], [], [], min(left, 0.5))
        if not readable:
            if not alive():
                raise EOFError("the worker exited")
            continue
        try:
            k = sock.recv_into(view[got:], n - got)
        except BlockingIOError:
            continue
        if k == 0:
            raise EOFError("the worker closed the channel")
        got += k
    return bytes(buf)


def recv_frame(sock: socket.socket, deadline: float, limit: int,
               alive: Callable[[], bool] = lambda: True) -> bytes:
    """One frame, read before ``deadline`` and at most ``limit`` bytes long; the length is
    checked before a byte of the body is buffered."""
    (n,) = struct.unpack("!i", _read_exact(sock, 4, deadline, alive))
    if n == -1:
        (n,) = struct.unpack("!Q", _read_exact(sock, 8, deadline, alive))
    if n < 0 or n > limit:
        raise FrameTooLarge(f"the worker announced a reply of {n} bytes, more than the "
                            f"{limit} accepted")
    return _read_exact(sock, n, deadline, alive)


@dataclass
class CallResult:
    """The outcome of one kernel call, as data (never an exception)."""

    status: str  # ok | raised | crashed | timeout | bad-output | tampered
    out: Optional[np.ndarray] = None
    meta: dict = field(default_factory=dict)
    flags: list = field(default_factory=list)
    error: str = ""
    error_type: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        if self.status == "raised":
            return f"the kernel raised {self.error_type}: {self.error}"
        if self.status == "crashed":
            return f"the kernel crashed the worker process ({self.error})"
        if self.status == "timeout":
            return f"the kernel did not return within {self.error}"
        if self.status == "bad-output":
            return f"the kernel returned a {self.error_type}, not an array"
        if self.status == "tampered":
            return f"the kernel tampered with the channel to the checker: {self.error}"
        if self.status in LIMIT_STATUSES:
            return f"the kernel ran into the worker's {self.error}"
        return "ok"

    @classmethod
    def from_reply(cls, status: str, reply: dict) -> "CallResult":
        """A worker's (status, payload) reply as data."""
        return cls(status=status, out=reply.get("out"), meta=reply.get("meta", {}),
                   flags=list(reply.get("flags", [])),
                   error=reply.get("message") or reply.get("error", ""),
                   error_type=reply.get("type", ""), seconds=reply.get("seconds", 0.0))


#: the only globals a worker's reply may name: numpy arrays, dtypes and scalars (and
#: ml_dtypes' scalar types).  Anything else in a reply (a pickle that would import
#: and call, say, os.system in this process) is tampering.
SAFE_GLOBALS = {
    ("builtins", "complex"), ("builtins", "slice"), ("builtins", "range"),
    ("numpy", "dtype"), ("numpy", "ndarray"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
}


class _ReplyUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in SAFE_GLOBALS:
            return super().find_class(module, name)
        if module == "ml_dtypes" and not name.startswith("_"):
            import ml_dtypes
            obj = getattr(ml_dtypes, name, None)
            if isinstance(obj, type) and issubclass(obj, np.generic):
                return obj
        raise pickle.UnpicklingError(f"a reply may not name {module}.{name}")


def safe_loads(data: bytes):
    """A worker's reply, unpickled with only plain data and numpy allowed: a kernel
    that writes its own pickle to the channel cannot run code in the checker."""
    try:
        reply = _ReplyUnpickler(io.BytesIO(data)).load()
    except Exception as exc:
        return "tampered", {"error": f"the worker's reply is not plain data ({exc})"}
    if not (isinstance(reply, tuple) and len(reply) == 2 and isinstance(reply[0], str)
            and isinstance(reply[1], dict)):
        return "tampered", {"error": "the worker's reply is not a (status, payload) pair"}
    return reply


@functools.lru_cache(maxsize=None)
def _installation_roots() -> tuple:
    """The Python installation's library folders and kcontract's own (found once)."""
    import sysconfig
    roots = {os.path.realpath(v) for k, v in sysconfig.get_paths().items()
             if k in ("stdlib", "platstdlib", "purelib", "platlib") and v}
    roots.add(os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    roots.update(os.path.realpath(p) for p in sys.path if p and "site-packages" in p)
    return tuple(sorted(roots))


def module_files(paths, limit: int = 2000) -> list:
    """``[{path, sha256}]`` for the files among ``paths`` that lie outside the Python
    installation and kcontract itself (the kernel's own file and the helpers it imports),
    hashed here, by the checker, from the files themselves."""
    import hashlib
    roots = _installation_roots()
    out = []
    for p in list(paths or [])[:limit]:
        if not isinstance(p, str):
            continue
        real = os.path.realpath(p)
        if any(real == r or real.startswith(r + os.sep) for r in roots) or not os.path.isfile(real):
            continue
        try:
            with open(real, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            continue
        out.append({"path": real, "sha256": digest})
    return sorted(out, key=lambda m: m["path"])


#: the kernel's own source tree, hashed by the checker: at most this many files and bytes,
#: this deep below the kernel's folder (or top package)
TREE_FILES, TREE_BYTES, TREE_DEPTH = 512, 64 << 20, 6
TREE_SUFFIXES = (".py", ".so", ".pyd")
#: shared objects mapped from these folders are the system's, not the kernel's
SYSTEM_PREFIXES = ("/usr/", "/lib/", "/lib32/", "/lib64/", "/libx32/", "/etc/", "/snap/",
                   "/nix/store/", "/opt/conda/pkgs/", "/proc/", "/sys/", "/dev/")


def spec_file(spec: str) -> Optional[str]:
    """The source file a kernel spec names, found without importing anything."""
    from .worker import is_path_spec
    target = spec.rpartition(":")[0]
    if not target:
        return None
    if is_path_spec(target):
        return os.path.abspath(target) if os.path.isfile(target) else None
    return find_module_file(target)


def find_module_file(dotted: str) -> Optional[str]:
    """The file of module ``dotted``, looked up on this process's ``sys.path`` the way
    ``import`` would, without importing anything (``importlib.util.find_spec`` would run
    the parent packages' ``__init__``: kernel code)."""
    import importlib.machinery
    locations, found = None, None
    parts = dotted.split(".")
    for i in range(len(parts)):
        name = ".".join(parts[:i + 1])
        try:
            found = importlib.machinery.PathFinder.find_spec(
                name, locations if locations is not None else [os.getcwd()] + sys.path)
        except (ImportError, ValueError, OSError):
            return None
        if found is None:
            return None
        locations = list(found.submodule_search_locations or [])
    origin = getattr(found, "origin", None)
    return origin if origin and os.path.isfile(origin) else None


def source_tree(spec: str) -> list:
    """The files of the kernel's own source tree, as the checker finds them on disk: the
    Python and extension modules in the kernel file's folder (its top package's folder
    when it is in a package) and below, skipping ``__pycache__``, hidden folders, virtual
    environments and the Python installation; bounded by :data:`TREE_FILES`,
    :data:`TREE_BYTES` and :data:`TREE_DEPTH`.  A helper the kernel imports is listed
    whatever the worker reports."""
    src = spec_file(spec)
    if src is None:
        return []
    root = os.path.dirname(os.path.realpath(src))
    while os.path.isfile(os.path.join(os.path.dirname(root), "__init__.py")) and \
            os.path.isfile(os.path.join(root, "__init__.py")):
        root = os.path.dirname(root)
    roots = _installation_roots()
    out, total = [os.path.realpath(src)], 0
    base_depth = root.rstrip(os.sep).count(os.sep)
    # a kernel file lying in a folder everyone shares: that folder's own files only
    shared = {os.path.realpath(p) for p in ("/", tempfile.gettempdir(), os.path.expanduser("~"))}
    depth = 1 if root in shared else TREE_DEPTH
    for folder, dirs, files in os.walk(root):
        if folder.count(os.sep) - base_depth >= depth - 1:
            dirs[:] = []
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith(".")
                         and not os.path.isfile(os.path.join(folder, d, "pyvenv.cfg"))
                         and os.path.realpath(os.path.join(folder, d)) not in roots)
        for name in sorted(files):
            if not name.endswith(TREE_SUFFIXES):
                continue
            path = os.path.join(folder, name)
            try:
                total += os.path.getsize(path)
            except OSError:
                continue
            if len(out) >= TREE_FILES or total > TREE_BYTES:
                return out
            out.append(os.path.realpath(path))
    return out


_PYTHON_HOMES = tuple(sorted({os.path.realpath(p).rstrip(os.sep) + os.sep
                              for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}))


def mapped_files(pid: int) -> list:
    """The files mapped executable into process ``pid`` (its shared objects), read by the
    checker from ``/proc/<pid>/maps``, outside the system's library folders."""
    out = set()
    try:
        with open(f"/proc/{pid}/maps") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        path = parts[5].strip()
        if path.startswith("/") and not path.endswith("(deleted)") and \
                not path.startswith(SYSTEM_PREFIXES) and not path.startswith(_PYTHON_HOMES):
            out.add(path)
    return sorted(out)


def output_digest(out: np.ndarray) -> str:
    """The identity of an output's bits (dtype, shape and bytes): equal digests, equal outputs."""
    a = np.ascontiguousarray(out)
    return hashlib.sha1(a.dtype.str.encode() + str(a.shape).encode() + a.tobytes()).hexdigest()


class KernelLoadError(Exception):
    """The kernel could not be imported (its module raised, or no such function).
    ``spec_error``: the spec names nothing callable (no such file or function), a usage
    mistake rather than a fault of the kernel."""

    def __init__(self, message: str, *, spec_error: bool = False):
        super().__init__(message)
        self.spec_error = spec_error


class KernelProcess:
    #: the module run as the worker (``python -m MODULE FD``)
    worker_module = "kcontract.check.worker"

    def __init__(self, kernel: str, framework: str = "numpy", device: str = "cpu",
                 timeout: float = DEFAULT_TIMEOUT, load_timeout: float = 120.0,
                 paths: Optional[list] = None, sandbox: Optional[Sandbox] = None,
                 decoys: bool = True):
        self.kernel = kernel
        #: extra import roots the worker puts first on sys.path (a test module's root)
        self.paths = list(paths or [])
        self.framework = framework
        self.device = device
        self.timeout = timeout
        self.load_timeout = load_timeout
        self.proc: Optional[subprocess.Popen] = None
        self.info: dict = {}
        self.restarts = 0
        self._log = tempfile.TemporaryFile(mode="w+b")
        #: where workers run (:mod:`.jail`): bubblewrap, or none where it is missing
        self.sandbox = sandbox if sandbox is not None else detect()
        self._scratch = None
        self.arena: Optional[InputArena] = None
        self.sock: Optional[socket.socket] = None
        #: the largest reply accepted (bytes); a larger one is the kernel's fault
        self.max_reply = MAX_REPLY
        #: decoy calls (see :meth:`_decoy_calls`); off for trusted kernels (calibration)
        self.decoys = decoys
        #: digests (:func:`output_digest`) of the outputs of decoy calls: a kernel that later
        #: returns one of them on other inputs is returning a stale output
        self.decoy_digests: set[str] = set()
        self._burst: Optional[int] = None
        self._sibling: Optional["KernelProcess"] = None
        #: the current worker's cgroup (:mod:`.limits`), None without a sandbox
        self.cgroup: Optional[WorkerCgroup] = None
        #: the resource limits the last worker ran under and what enforced each
        self.limits: dict = {}
        #: who read the floating-point control state: "checker (ptrace)" while every read
        #: succeeded, "worker-reported" once one could not be made (and before any)
        self.fp_state = ""
        self._wpid: Optional[int] = None
        #: shared objects seen mapped in this handle's workers (read by the checker)
        self.mapped: set = set()

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> dict:
        self._open_worker(dict(os.environ))
        return self._load()

    def _open_worker(self, env: dict) -> None:
        parent_sock, child_sock = socket.socketpair()
        fd = child_sock.fileno()
        env.setdefault("PYTHONUNBUFFERED", "1")
        # no bytecode written (the sandbox is read-only anyway) and none read from a
        # folder the kernel could have planted one in before the run
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        # a hash seed of its own per worker: "deterministic" must hold across processes
        env["PYTHONHASHSEED"] = str(_RNG.randint(1, 2 ** 32 - 1))
        # glibc fills every block it hands out with junk: a numpy output the kernel
        # allocates but never writes holds garbage, not zeros or an earlier result
        from .worker import MALLOC_PERTURB
        env.setdefault("MALLOC_PERTURB_", MALLOC_PERTURB)
        # a fresh, empty scratch folder per worker: nothing a kernel leaves there (a
        # call counter, a cache) reaches the next worker
        self._drop_scratch()
        self._scratch = self.sandbox.scratch()
        self._drop_arena()
        self.arena = InputArena()
        self._wpid = None
        argv = self.sandbox.command([sys.executable, "-m", self.worker_module, str(fd),
                                     str(self.arena.fd)],
                                    scratch=self._scratch.name, device=self.device,
                                    hide=hidden_folders() if self.sandbox.isolated else ())
        preexec = None
        if self.sandbox.isolated:
            self._drop_cgroup()
            self.cgroup = WorkerCgroup()
            preexec = self.sandbox.preexec(self.device, join=self.cgroup.join,
                                           memory=self.cgroup.limits.get("memory"),
                                           memory_by_cgroup="memory" in self.cgroup.how,
                                           processes=self.cgroup.limits.get("processes"))
        with warnings.catch_warnings():
            # JAX warns on every fork of its multithreaded process; the child here runs only
            # the system calls of ``preexec`` (no lock another thread could hold) and execs
            warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called",
                                    category=RuntimeWarning)
            self.proc = subprocess.Popen(
                argv, pass_fds=(fd, self.arena.fd), stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=self._log, env=env, start_new_session=True, preexec_fn=preexec)
        if self.cgroup is not None:
            self.cgroup.verify(self.proc.pid)
        self.limits = self._limits_record()
        child_sock.close()
        parent_sock.setblocking(False)
        self.sock = parent_sock

    def _limits_record(self) -> dict:
        """What the run records about the worker's limits: each with its value and what
        enforces it (a cgroup, an rlimit) or why nothing does."""
        if not self.sandbox.isolated:
            why = {"enforced": "no", "why": "no sandbox"}
            return {k: dict(why, limit=None) for k in ("memory", "processes", "cpu_seconds",
                                                       "open_files")}
        rec = self.cgroup.record() if self.cgroup is not None else {}
        mem = rec.get("memory", {})
        if mem.get("enforced") == "no" and address_limit(self.device, mem.get("limit"), False):
            mem.update(enforced="rlimit (address space)", why=mem.get("why", ""))
        procs = rec.get("processes", {})
        if procs.get("enforced") == "no" and procs.get("limit") and os.geteuid() != 0:
            procs.update(enforced="rlimit (per user)")  # root ignores RLIMIT_NPROC
        rec["cpu_seconds"] = {"limit": CPU_SECONDS, "enforced": "rlimit"}
        rec["open_files"] = {"limit": OPEN_FILES, "enforced": "rlimit"}
        return rec

    def _limit_hit(self, res: "CallResult") -> "CallResult":
        """``res`` as a limit verdict when the call ran into the worker's memory or process
        limit (the cgroup's own counters, read here; or a MemoryError under the
        address-space limit)."""
        hit = self.cgroup.events() if self.cgroup is not None else []
        mem = (self.limits.get("memory") or {})
        if not hit and res.status == "raised" and res.error_type == "MemoryError" and \
                mem.get("enforced", "no") != "no":
            hit = ["memory"]
        if not hit:
            return res
        kind = "memory" if "memory" in hit else "processes"
        lim = self.limits.get(kind) or {}
        what = (f"memory limit ({lim.get('limit')} bytes, {lim.get('enforced')})"
                if kind == "memory" else
                f"process limit ({lim.get('limit')} tasks, {lim.get('enforced')})")
        detail = res.describe() if not res.ok else "it returned"
        return CallResult(status="memory-limit" if kind == "memory" else "process-limit",
                          error=f"{what}; {detail}", flags=res.flags, seconds=res.seconds)

    def _load(self) -> dict:
        self._burst = None  # a fresh worker: its first call gets a burst of decoys
        status, payload = self._request(("load", self.load_payload()), self.load_timeout)
        if status == "ok" and self.cgroup is not None and self.cgroup.events():
            status, payload = "raised", {"message": "the kernel's module ran into the worker's "
                                                    "memory or process limit on import"}
        if status == "ok":
            self._see_mappings()
        if status != "ok":
            msg = payload.get("message") or payload.get("error") or status
            self.close()
            kind = payload.get("type", "")
            if kind == "KernelSpecError":
                raise KernelLoadError(f"cannot load kernel {self.kernel}: {msg}", spec_error=True)
            raise KernelLoadError(f"cannot load kernel {self.kernel}: {kind}{': ' if kind else ''}"
                                  f"{msg}")
        self.info = payload
        return payload

    def reload(self, kernel: str) -> dict:
        """Load another kernel into the running worker (a fresh one if it has died):
        saves the process start when many trusted kernels are checked in a row
        (calibration).  The worker is still replaced after any crash or tampering.  What
        the handle found about the previous kernel (mapped files, who read the FP state)
        is the previous run's, and is forgotten."""
        if kernel != self.kernel:
            self.mapped.clear()
            self.fp_state = ""
        self.kernel = kernel
        return self.info if self.ensure_alive() else self._load()

    def ensure_alive(self) -> bool:
        """Start a fresh worker if there is none or it has died; True when one was started."""
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            self.start()
            return True
        return False

    def load_payload(self) -> dict:
        return {"kernel": self.kernel, "framework": self.framework, "device": self.device,
                "cwd": os.getcwd(), "paths": self.paths, "fill_uninitialized": True,
                "introspection": True}

    def close(self) -> None:
        if self._sibling is not None:
            self._sibling.close()
            self._sibling._log.close()
            self._sibling = None
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        if self.proc is not None:
            if self.proc.poll() is None:
                # the whole session; in the sandbox, killing bubblewrap ends its PID
                # namespace, so nothing the kernel forked or setsid'd survives
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    self.proc.kill()
                except OSError:
                    pass
            self.proc.wait()
            self.proc = None
        self._drop_cgroup()
        self._drop_scratch()
        self._drop_arena()

    def _drop_cgroup(self) -> None:
        if self.cgroup is not None:
            self.cgroup.close()
            self.cgroup = None

    def worker_pid(self) -> Optional[int]:
        """The host pid of the current worker's Python process (found by the checker, see
        :func:`.fpstate.worker_pid`), None when there is none."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        if self._wpid is None or not os.path.exists(f"/proc/{self._wpid}"):
            self._wpid = fpstate.worker_pid(self.proc.pid, self.sandbox.isolated)
        return self._wpid

    def _see_mappings(self) -> None:
        pid = self.worker_pid()
        if pid is not None:
            self.mapped.update(mapped_files(pid))

    def check_fp_state(self, res: "CallResult") -> None:
        """The worker's floating-point control registers (flush-to-zero, denormals-are-zero,
        rounding), read by this process after the call (:mod:`.fpstate`), whatever the
        worker reports: a change is the flag ``state:fp-control``.  Where they cannot be
        read, the worker's own report is all there is (:attr:`fp_state` says so)."""
        pid = self.worker_pid()
        # the calling thread's registers: what the kernel's callers share.  Threads the kernel
        # or its framework runs its own work on (XLA's pool sets flush-to-zero in its threads)
        # are that work's numerics, which the contracts judge on the outputs (C-PRC-03)
        threads = fpstate.read_threads(pid, only=(pid,)) if pid is not None else None
        if threads is None:
            other = fpstate.tracer(pid) if pid is not None else 0
            if other and self.proc is not None and fpstate.descends_from(other, self.proc.pid):
                # a tracer among the worker's own processes (a debugger around the checker
                # is not): the kernel's, there to keep the checker from reading registers
                res.flags.append(f"state:fp-control unreadable (the worker is traced by "
                                 f"its own process {other})")
                self.fp_state = self.fp_state or "checker (ptrace)"
                self.close()
                return
            if pid is not None or not self.fp_state:
                self.fp_state = "worker-reported"
            return
        if not self.fp_state:
            self.fp_state = "checker (ptrace)"
        changes = fpstate.changed(threads)
        if changes:
            res.flags.append("state:fp-control " + "; ".join(changes[:4]))
            self.close()  # never reuse a worker whose numerics the kernel changed

    def _drop_arena(self) -> None:
        if self.arena is not None:
            self.arena.close()
            self.arena = None

    def _drop_scratch(self) -> None:
        if self._scratch is not None:
            try:
                self._scratch.cleanup()
            except OSError:
                pass
            self._scratch = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        self._log.close()

    def output_tail(self, n: int = 2000) -> str:
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - n))
            return self._log.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""

    # -- calls ----------------------------------------------------------------------
    def _request(self, msg, timeout: float):
        """Send one request and wait for its reply, both bounded: ``timeout`` seconds for
        the whole exchange and :attr:`max_reply` bytes for the reply.  A half-written
        frame, a silent worker or an oversized reply is an outcome, never a hang."""
        deadline = time.monotonic() + timeout
        try:
            data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
            send_frame(self.sock, data, deadline)
        except FrameTimeout:
            return "timeout", {"error": f"{timeout:g} s (the worker stopped reading)"}
        except (OSError, AttributeError) as exc:
            return "crashed", {"error": f"worker gone before the call ({exc})"}
        try:
            reply = recv_frame(self.sock, deadline, self.max_reply,
                               alive=lambda: self.proc is not None and self.proc.poll() is None)
        except FrameTimeout:
            return "timeout", {"error": f"{timeout:g} s"}
        except FrameTooLarge as exc:
            return "tampered", {"error": str(exc)}
        except (EOFError, OSError):
            return "crashed", {"error": self._death()}
        return safe_loads(reply)

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "worker stopped answering"
        if code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"worker exited with status {code}"

    def sibling(self) -> "KernelProcess":
        """A second worker for the same kernel (its own process, hash seed and scratch),
        started on first use and closed with this one: for comparisons across processes.
        When this handle is reloaded (trusted kernels in a row: calibration, surveys), the
        second worker is reloaded too, as this one is, instead of started again."""
        if self._sibling is None:
            self._sibling = type(self)(self.kernel, framework=self.framework,
                                       device=self.device, timeout=self.timeout,
                                       load_timeout=self.load_timeout, paths=self.paths,
                                       sandbox=self.sandbox, decoys=self.decoys)
        elif self._sibling.kernel != self.kernel:  # this handle was reloaded since
            self._sibling.reload(self.kernel)
        return self._sibling

    @property
    def sandbox_name(self) -> str:
        return self.sandbox.name

    def modules(self) -> list:
        """The module files the worker has loaded (outside the Python installation),
        hashed by this process; empty when the worker cannot say."""
        try:
            if self.ensure_alive():
                self.restarts += 1
        except KernelLoadError:
            return []
        self._see_mappings()
        status, payload = self._request(("modules", {}), min(self.timeout, 30.0))
        files = payload.get("files") if status == "ok" else None
        if status in ("crashed", "timeout", "tampered"):
            self.close()
        files = [f for f in files if isinstance(f, str)] if isinstance(files, list) else []
        # what the checker finds itself (the kernel's source tree, the shared objects
        # mapped in its workers) first, so that no report, however long, crowds it out;
        # then the worker's report
        return module_files(list(dict.fromkeys(source_tree(self.kernel) + sorted(self.mapped)
                                               + files)))

    def call(self, args: list, kwargs: dict | None = None, *, poison: bool = True,
             timeout: Optional[float] = None, layout: Optional[str] = None,
             extra: Optional[dict] = None) -> CallResult:
        """One call of the kernel on ``args``, with its decoys, its inputs in the shared
        arena (checked here afterwards) and the FP-register read.  ``extra``: more payload
        for a worker that takes it (KernelBench's ``rng_seed``), sent with the decoys too."""
        nbytes = int(sum(getattr(a, "nbytes", 0) for a in args))
        if self.decoys:
            tampered = self._decoy_calls(args, kwargs, layout, timeout, extra)
            if tampered is not None:
                return tampered
        if self.ensure_alive():
            self.restarts += 1
        args = list(args)
        descs = self.arena.put(args)
        sent = [None if d is not None else a for a, d in zip(args, descs)]
        res = self.request("call", {**(extra or {}), "args": sent, "shared": descs,
                                    "kwargs": kwargs or {}, "poison": poison,
                                    "poison_bytes": nbytes, "layout": layout}, timeout)
        if self.arena is not None and not layout:
            # the parent's own look at the inputs, whatever the worker says about them
            for i in self.arena.changed(args, descs):
                flag = f"mutated-input:{i}"
                if flag not in res.flags:
                    res.flags.append(flag)
        if self.proc is not None:
            self.check_fp_state(res)
        return res

    def _decoy_calls(self, args, kwargs, layout, timeout, extra=None) -> Optional[CallResult]:
        """Calls whose outputs nobody looks at, on the real call's shapes with its values
        shuffled: a burst of a secret, random length (:data:`DECOY_BURST`) before the
        first call of every worker, and now and then one between calls.  A kernel cannot
        count its way to the calls that matter ("honest for the first N calls", "cheat on
        call k"); the burst stops early for a slow kernel (:data:`DECOY_SECONDS`).  A decoy
        in which the kernel tampered with its process is returned: that is the kernel's
        doing whatever the inputs."""
        if self.ensure_alive():  # first, so that a fresh worker gets its burst
            self.restarts += 1
        if self._burst is None:
            count = self._burst = _RNG.randint(*DECOY_BURST)
        elif _RNG.random() < DECOY_RATE:
            count = 1
        else:
            return None
        # a kernel that caches returns its first output at these shapes, one that reuses
        # memory its last: remembering those two keeps the burst's cost one call's.
        # (Shuffled inputs equal to the real ones -- one element, or all alike -- are the
        # real call's inputs: the same output then is no sign of a stale one.)
        t_end = time.monotonic() + DECOY_SECONDS
        last = None
        for i in range(count):
            fake = [_shuffled(a) for a in args]
            res = self.request("call", {**(extra or {}), "args": fake, "kwargs": kwargs or {},
                                        "poison": False, "layout": layout}, timeout)
            if any(f.startswith(TAMPERING) for f in res.flags) or res.status in LIMIT_STATUSES:
                return res
            if res.ok and isinstance(res.out, np.ndarray):
                if i == 0 and _differs(fake, args):
                    self._remember_decoy(res.out)
                last = (fake, res.out)
            if not res.ok or self.proc is None or time.monotonic() > t_end:
                break  # a failing decoy: the real call shows the failure itself
        if last is not None and count > 1 and _differs(last[0], args):
            self._remember_decoy(last[1])
        return None

    def _remember_decoy(self, out: np.ndarray) -> None:
        if len(self.decoy_digests) < 65536:
            self.decoy_digests.add(output_digest(out))

    def request(self, verb: str, payload: dict, timeout: Optional[float] = None) -> CallResult:
        """One request to the worker (restarted first if it died), its reply as data."""
        if self.ensure_alive():
            self.restarts += 1
        res = self._limit_hit(CallResult.from_reply(*self._request((verb, payload),
                                                                  timeout or self.timeout)))
        if res.status in ("crashed", "timeout", "tampered") + LIMIT_STATUSES or any(
                f.startswith(TAMPERING) for f in res.flags):
            # never reuse a process the kernel has broken or tampered with
            self.close()
        return res


class InProcessKernel:
    """Same interface as :class:`KernelProcess`, no isolation (debugging only)."""

    def __init__(self, kernel: str, framework: str = "numpy", device: str = "cpu",
                 timeout: float = DEFAULT_TIMEOUT, paths: Optional[list] = None, **_: Any):
        from .worker import Worker
        self.kernel, self.framework, self.device = kernel, framework, device
        self.paths = list(paths or [])
        self.worker = Worker()
        self.info: dict = {}
        self.restarts = 0

    def start(self) -> dict:
        try:
            self.info = self.worker.load({"kernel": self.kernel, "framework": self.framework,
                                          "device": self.device, "cwd": os.getcwd(),
                                          "paths": self.paths})
        except Exception as exc:
            from .worker import KernelSpecError
            if isinstance(exc, KernelSpecError):
                raise KernelLoadError(f"cannot load kernel {self.kernel}: {exc}", spec_error=True)
            raise KernelLoadError(f"cannot load kernel {self.kernel}: {type(exc).__name__}: {exc}")
        return self.info

    def close(self) -> None:
        pass

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def output_tail(self, n: int = 2000) -> str:
        return ""

    sandbox_name = "in-process"

    def modules(self) -> list:
        from .worker import loaded_files
        return module_files(loaded_files())

    def call(self, args, kwargs=None, *, poison=True, timeout=None, layout=None) -> CallResult:
        try:
            status, payload = self.worker.call({"args": list(args), "kwargs": kwargs or {},
                                                "poison": poison, "layout": layout})
        except Exception as exc:
            return CallResult(status="raised", error=str(exc), error_type=type(exc).__name__)
        return CallResult.from_reply(status, payload)
