"""The parent side of isolation: a kernel handle that calls into a worker process.

:class:`KernelProcess` keeps one worker alive across calls (imports are paid
once), detects crashes (EOF, signal), hangs (timeout) and state tampering, and
starts a fresh worker after any of them.  :class:`InProcessKernel` has the same
interface and runs the kernel in this process (``--in-process``, for debugging).
"""
from __future__ import annotations

import io
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Optional

import numpy as np

DEFAULT_TIMEOUT = 60.0


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
                 paths: Optional[list] = None):
        self.kernel = kernel
        #: extra import roots the worker puts first on sys.path (a test module's root)
        self.paths = list(paths or [])
        self.framework = framework
        self.device = device
        self.timeout = timeout
        self.load_timeout = load_timeout
        self.proc: Optional[subprocess.Popen] = None
        self.conn: Optional[Connection] = None
        self.info: dict = {}
        self.restarts = 0
        self._log = tempfile.TemporaryFile(mode="w+b")

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> dict:
        parent_sock, child_sock = socket.socketpair()
        fd = child_sock.fileno()
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # glibc fills every block it hands out with junk: a numpy output the kernel
        # allocates but never writes holds garbage, not zeros or an earlier result
        from .worker import MALLOC_PERTURB
        env.setdefault("MALLOC_PERTURB_", MALLOC_PERTURB)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.worker_module, str(fd)],
            pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            env=env, start_new_session=True)
        child_sock.close()
        self.conn = Connection(parent_sock.detach())
        return self._load()

    def _load(self) -> dict:
        status, payload = self._request(("load", self.load_payload()), self.load_timeout)
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
        (calibration).  The worker is still replaced after any crash or tampering."""
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
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    self.proc.kill()
            self.proc.wait()
            self.proc = None

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
        try:
            self.conn.send(msg)
        except (OSError, BrokenPipeError) as exc:
            return "crashed", {"error": f"worker gone before the call ({exc})"}
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout", {"error": f"{timeout:g} s"}
            try:
                data = self.conn.recv_bytes() if self.conn.poll(min(left, 0.5)) else None
            except (EOFError, OSError):
                return "crashed", {"error": self._death()}
            if data is not None:
                return safe_loads(data)
            if self.proc.poll() is not None:
                return "crashed", {"error": self._death()}

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

    def call(self, args: list, kwargs: dict | None = None, *, poison: bool = True,
             timeout: Optional[float] = None, layout: Optional[str] = None) -> CallResult:
        nbytes = int(sum(getattr(a, "nbytes", 0) for a in args))
        return self.request("call", {"args": list(args), "kwargs": kwargs or {},
                                     "poison": poison, "poison_bytes": nbytes, "layout": layout},
                            timeout)

    def request(self, verb: str, payload: dict, timeout: Optional[float] = None) -> CallResult:
        """One request to the worker (restarted first if it died), its reply as data."""
        if self.ensure_alive():
            self.restarts += 1
        res = CallResult.from_reply(*self._request((verb, payload), timeout or self.timeout))
        if res.status in ("crashed", "timeout", "tampered") or any(
                f.startswith(("state:", "patched:", "introspect:")) for f in res.flags):
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

    def call(self, args, kwargs=None, *, poison=True, timeout=None, layout=None) -> CallResult:
        try:
            status, payload = self.worker.call({"args": list(args), "kwargs": kwargs or {},
                                                "poison": poison, "layout": layout})
        except Exception as exc:
            return CallResult(status="raised", error=str(exc), error_type=type(exc).__name__)
        return CallResult.from_reply(status, payload)
