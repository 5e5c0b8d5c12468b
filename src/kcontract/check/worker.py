"""The isolated worker: imports the kernel and calls it; never sees an oracle.

Run as ``python -m kcontract.check.worker FD`` with ``FD`` one end of a socket
pair.  Each request is a pickled tuple ``(verb, payload)``; each reply is
``(status, payload)``.  Whatever the kernel does to this process (flush-to-zero,
monkeypatching numpy, os._exit, a segfault) stays in this process: the parent
notices, records it in the verdict, and starts a fresh worker.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import time
import traceback

import numpy as np

#: numpy functions a gaming kernel might patch to fool a checker
WATCHED_NUMPY = ("allclose", "isclose", "array_equal", "asarray", "array", "matmul", "sum",
                 "abs", "max", "testing", "isfinite", "isnan", "where", "all", "any")


def resolve_kernel(spec: str):
    """``path/to/file.py:function`` or ``package.module:function`` -> (function, module file)."""
    if ":" not in spec:
        raise ValueError(f"kernel must be 'path/to/file.py:function' or 'module:function', got {spec!r}")
    target, _, attr = spec.rpartition(":")
    if target.endswith(".py") or os.sep in target or "/" in target:
        path = os.path.abspath(target)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such kernel file: {target}")
        name = "kcontract_kernel_" + hashlib.sha1(path.encode()).hexdigest()[:10]
        mod_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[name] = module
        sys.path.insert(0, os.path.dirname(path))
        mod_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"{target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{spec} is not callable")
    return obj, module


def kernel_identity(fn, module) -> dict:
    try:
        src_file = inspect.getsourcefile(module) or ""
        with open(src_file, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
    except (TypeError, OSError):
        src_file, digest = "", ""
    try:
        params = inspect.signature(fn).parameters
        accepts = [n for n, p in params.items()]
        var_kw = any(p.kind == p.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        accepts, var_kw = [], True
    configs = getattr(module, "CONFIGS", None)
    if configs is not None:
        configs = [dict(c) if isinstance(c, dict) else c for c in configs]
    return {"module": getattr(module, "__name__", ""), "file": os.path.basename(src_file),
            "source_sha256": digest, "accepts": accepts, "var_kw": var_kw, "configs": configs}


def _snapshot_numpy():
    return {name: id(getattr(np, name, None)) for name in WATCHED_NUMPY}


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


class Worker:
    def __init__(self):
        self.fn = None
        self.adapter = None
        self.device = "cpu"
        self.base_state = None
        self.numpy_ids = _snapshot_numpy()

    def load(self, payload):
        from ..adapters import get_adapter
        sys.path.insert(0, payload.get("cwd") or os.getcwd())
        self.adapter = get_adapter(payload["framework"])
        self.device = payload.get("device") or "cpu"
        self.fn, module = resolve_kernel(payload["kernel"])
        self.base_state = self.adapter.state()
        return kernel_identity(self.fn, module)

    def call(self, payload):
        ad = self.adapter
        arrays = payload["args"]
        kwargs = payload.get("kwargs") or {}
        natives = [ad.to_native(a, self.device) for a in arrays]
        if payload.get("poison"):
            ad.poison(payload.get("poison_bytes", 1 << 20))
        ad.synchronize(self.device)
        t0 = time.perf_counter()
        out = self.fn(*natives, **kwargs)
        ad.synchronize(self.device)
        seconds = time.perf_counter() - t0
        flags = []
        # process-wide state the kernel may have flipped
        after = ad.state()
        for key, before in self.base_state.items():
            if after.get(key) != before:
                flags.append(f"state:{key}")
        if flags:
            ad.restore(self.base_state)
        now = _snapshot_numpy()
        patched = [k for k, v in now.items() if v != self.numpy_ids[k]]
        if patched:
            flags.append("patched:numpy." + ",".join(patched))
        # inputs must be unchanged
        for i, (orig, nat) in enumerate(zip(arrays, natives)):
            back, _ = ad.to_numpy(nat) if ad.is_array(nat) else (None, None)
            if back is None or not _same_bits(np.asarray(back), np.asarray(orig)):
                flags.append(f"mutated-input:{i}")
        if isinstance(out, (tuple, list)) and len(out) == 1:
            out = out[0]
        if not ad.is_array(out):
            return "bad-output", {"type": type(out).__name__, "flags": flags, "seconds": seconds}
        for i in ad.shares_memory(out, natives):
            flags.append(f"aliased-output:{i}")
        arr, meta = ad.to_numpy(out)
        return "ok", {"out": arr, "meta": meta, "flags": flags, "seconds": seconds}


def serve(fd: int) -> None:
    from multiprocessing.connection import Connection
    conn = Connection(fd)
    worker = Worker()
    while True:
        try:
            verb, payload = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if verb == "load":
                reply = ("ok", worker.load(payload))
            elif verb == "call":
                reply = worker.call(payload)
            elif verb == "ping":
                reply = ("ok", {"pid": os.getpid()})
            elif verb == "exit":
                conn.send(("ok", {}))
                return
            else:
                reply = ("raised", {"type": "ProtocolError", "message": f"unknown verb {verb}"})
        except BaseException as exc:  # the kernel's exception, reported as data
            if isinstance(exc, KeyboardInterrupt):
                raise
            tb = traceback.format_exc(limit=8)
            reply = ("raised", {"type": type(exc).__name__, "message": str(exc)[:2000],
                                "traceback": tb[-4000:]})
        try:
            conn.send(reply)
        except Exception as exc:  # unpicklable output etc.
            conn.send(("raised", {"type": "TransportError",
                                  "message": f"could not return the kernel's result: {exc}"}))


if __name__ == "__main__":  # pragma: no cover - exercised through the sandbox
    serve(int(sys.argv[1]))
