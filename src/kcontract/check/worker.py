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
import pickle
import sys
import time
import traceback

import numpy as np

#: numpy functions a gaming kernel might patch to fool a checker
WATCHED_NUMPY = ("allclose", "isclose", "array_equal", "asarray", "array", "matmul", "sum",
                 "abs", "max", "testing", "isfinite", "isnan", "where", "all", "any")
#: torch functions likewise (watched only when torch is loaded before the kernel)
WATCHED_TORCH = ("allclose", "isclose", "equal", "testing.assert_close", "isfinite", "isnan",
                 "matmul", "abs", "max", "all", "any", "Tensor.__eq__", "Tensor.allclose",
                 "Tensor.__sub__", "Tensor.abs")
#: torch process-wide switches a kernel could flip (besides what the adapter watches)
TORCH_SWITCHES = ("backends.cuda.matmul.allow_tf32",
                  "backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
                  "backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
                  "backends.cudnn.allow_tf32", "backends.cudnn.deterministic",
                  "backends.cudnn.benchmark", "backends.mkldnn.enabled")
#: audit events that show a kernel looking at frames or objects it was never given
INTROSPECTION_EVENTS = {"sys._getframe": "frames", "sys._current_frames": "frames",
                        "sys.settrace": "tracing", "sys.setprofile": "tracing",
                        "gc.get_objects": "gc", "gc.get_referrers": "gc",
                        "gc.get_referents": "gc"}
FRAME_ATTRIBUTES = ("tb_frame", "gi_frame", "cr_frame", "ag_frame")
#: fill byte for memory glibc hands out (MALLOC_PERTURB_ = 0x80 fills with 0x7f bytes:
#: about 3.4e38 as float32/bfloat16, NaN as float16, 1.4e306 as float64)
MALLOC_PERTURB = "128"


class KernelSpecError(ValueError):
    """The kernel spec names nothing callable: a malformed spec, no such file, no such
    attribute, or not callable (the user's mistake, not the kernel's)."""


def is_path_spec(target: str) -> bool:
    """Whether the module part of a kernel spec names a file (``path/to/file.py``) rather
    than an importable module (``package.module``)."""
    return target.endswith(".py") or os.sep in target or "/" in target


def source_sha256(path: str) -> str:
    """The sha256 of a kernel's source file: its identity in runs and certificates."""
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def load_module_file(path: str):
    """Import a Python file as a module of its own (its folder goes on ``sys.path``, so it
    can import its neighbours); what the file raises propagates."""
    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise KernelSpecError(f"no such kernel file: {path}")
    name = "kcontract_kernel_" + hashlib.sha1(path.encode()).hexdigest()[:10]
    mod_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(path))
    try:
        mod_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def resolve_kernel(spec: str):
    """``path/to/file.py:function`` or ``package.module:function`` -> (function, module file)."""
    if ":" not in spec:
        raise KernelSpecError(f"kernel must be 'path/to/file.py:function' or 'module:function', "
                              f"got {spec!r}")
    target, _, attr = spec.rpartition(":")
    if is_path_spec(target):
        if not os.path.exists(target):
            raise KernelSpecError(f"no such kernel file: {target}")
        module = load_module_file(target)
    else:
        module = importlib.import_module(target)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise KernelSpecError(f"{target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise KernelSpecError(f"{spec} is not callable")
    return obj, module


def kernel_identity(fn, module) -> dict:
    try:
        src_file = inspect.getsourcefile(module) or ""
        digest = source_sha256(src_file)
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


def _identity(obj) -> tuple:
    """Identity of a function: the object and, for Python functions, its code
    (``f.__code__ = ...`` patches a function without changing its id)."""
    return id(obj), id(getattr(obj, "__code__", None))


def _lookup(root, dotted: str):
    obj = root
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
    return obj


def _snapshot_numpy():
    snap = {f"numpy.{name}": _identity(getattr(np, name, None)) for name in WATCHED_NUMPY}
    torch = sys.modules.get("torch")
    if torch is not None:
        snap.update({f"torch.{name}": _identity(_lookup(torch, name)) for name in WATCHED_TORCH})
    return snap


def _torch_switches() -> dict:
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    out = {}
    for name in TORCH_SWITCHES:
        try:
            out[f"torch.{name}"] = bool(_lookup(torch, name))
        except Exception:  # pragma: no cover - a torch without this switch
            pass
    return out


def _restore_torch_switches(state: dict) -> None:
    torch = sys.modules.get("torch")
    for key, value in state.items():
        if not key.startswith("torch.backends.") or torch is None:
            continue
        owner, _, attr = key[len("torch."):].rpartition(".")
        try:
            setattr(_lookup(torch, owner), attr, value)
        except Exception:  # pragma: no cover
            pass


def overlapping(shape, strides, unit: int) -> bool:
    """True if two elements of an array with these strides share memory (a
    broadcast ``expand`` output, zero strides, ``as_strided`` tricks): a
    sufficient test that never flags a dense or permuted layout."""
    extent = unit
    dims = sorted((abs(int(s)), int(n)) for n, s in zip(shape, strides) if int(n) > 1)
    for stride, n in dims:
        if stride < extent:
            return True
        extent += (n - 1) * stride
    return False


class Introspection:
    """An audit hook: records a kernel's own code reading stack frames, walking
    the garbage collector's object lists or installing a tracer during a call.
    Calls made by libraries on the kernel's behalf (warnings, logging, torch)
    are not the kernel's and are not recorded."""

    SKIP = ("inspect.py", "traceback.py")

    def __init__(self):
        self.files: set = set()
        self.active = False
        self.seen: set = set()
        self._busy = False

    def __call__(self, event, args):
        if not self.active or self._busy:
            return
        kind = INTROSPECTION_EVENTS.get(event)
        if kind is None:
            if event != "object.__getattr__" or len(args) < 2 or args[1] not in FRAME_ATTRIBUTES:
                return
            kind = "frames"
        self._busy = True
        try:
            f = sys._getframe(1)
            while f is not None and os.path.basename(f.f_code.co_filename) in self.SKIP:
                f = f.f_back
            if f is not None and os.path.realpath(f.f_code.co_filename) in self.files:
                self.seen.add(kind)
        except Exception:  # pragma: no cover - never break the kernel's call
            pass
        finally:
            self._busy = False


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def _arena_views(fd: int, descs: list) -> list:
    """numpy views of the call's inputs in the shared arena (None where not an array)."""
    ends = [d[0] + int(np.prod(d[1], dtype=np.int64)) * np.dtype(d[2]).itemsize
            for d in descs if d is not None]
    if not ends or max(ends) == 0:
        return [None if d is None else np.empty(d[1], d[2]) for d in descs]
    import mmap
    mm = mmap.mmap(fd, max(ends))
    return [None if d is None else np.ndarray(d[1], dtype=d[2], buffer=mm, offset=d[0])
            for d in descs]


def shared_native(ad, view: np.ndarray, device: str):
    """The framework's array over the same memory as ``view`` where it can share it (numpy;
    torch on the CPU), so a write by the kernel lands where the parent looks; a copy on
    an accelerator."""
    if ad.name == "numpy":
        return view
    if ad.name == "torch" and device in ("cpu", "", None):
        import torch
        from ..adapters.torch_adapter import _VIEW
        name = view.dtype.name
        if name in _VIEW:
            tdt, as_int = _VIEW[name]
            return torch.from_numpy(view.view(as_int)).view(getattr(torch, tdt))
        return torch.from_numpy(view)
    return ad.to_native(np.array(view), device)


def native_value(ad, value, device: str = "cpu"):
    """numpy arrays (and numpy scalars, as 0-d arrays) become the framework's arrays; plain
    Python values (sizes, flags) stay as they are."""
    if isinstance(value, (np.ndarray, np.generic)):
        return ad.to_native(value, device)
    return value


class Worker:
    def __init__(self):
        self.arena_fd = None
        self.last_out = None
        #: the grad mode the caller itself runs the kernel under (None: as at load)
        self.grad_expected = None
        self.fn = None
        self.adapter = None
        self.device = "cpu"
        self.base_state = None
        self.numpy_ids = _snapshot_numpy()
        self.introspection = None

    def load(self, payload):
        from ..adapters import get_adapter
        sys.path.insert(0, payload.get("cwd") or os.getcwd())
        for extra in reversed(payload.get("paths") or []):
            sys.path.insert(0, extra)
        self.adapter = get_adapter(payload["framework"])
        self.device = payload.get("device") or "cpu"
        if payload["framework"] == "torch" and self.device == "cpu" and payload.get(
                "fill_uninitialized"):
            # torch.empty & co. return NaN-filled (integers: max) memory, whatever the
            # allocator reuses: an output the kernel never writes cannot look right
            import torch
            torch.use_deterministic_algorithms(True, warn_only=True)
            import torch.utils.deterministic
            torch.utils.deterministic.fill_uninitialized_memory = True
        # state before the kernel's module runs: switches flipped at import time count too
        self.base_state = self._state()
        self.numpy_ids = _snapshot_numpy()
        self.fn, module = resolve_kernel(payload["kernel"])
        if payload.get("introspection"):
            self._watch(module)
        return kernel_identity(self.fn, module)

    def _state(self) -> dict:
        st = dict(self.adapter.state())
        st.update(_torch_switches())
        torch = sys.modules.get("torch")
        if torch is not None:  # global modes a kernel could leave behind
            st["torch.grad_enabled"] = bool(torch.is_grad_enabled())
            get_dev = getattr(torch, "get_default_device", None)
            if get_dev is not None:
                st["torch.default_device"] = str(get_dev())
        return st

    def late_writes(self) -> list:
        """``late-write`` when the previous call's output changed after it was returned
        (a thread the kernel left behind still writing to it)."""
        last, self.last_out = self.last_out, None
        if last is None:
            return []
        obj, sent = last
        try:
            now, _ = self.adapter.to_numpy(obj)
        except Exception:
            return []
        return [] if _same_bits(np.asarray(now), sent) else ["late-write:previous call"]

    def _watch(self, module) -> None:
        files = set()
        for src in (getattr(module, "__file__", None),
                    getattr(getattr(self.fn, "__code__", None), "co_filename", None)):
            if src:
                files.add(os.path.realpath(src))
        if self.introspection is None:
            self.introspection = Introspection()
            sys.addaudithook(self.introspection)
        self.introspection.files = files

    def call(self, payload):
        ad = self.adapter
        arrays = payload["args"]
        kwargs = payload.get("kwargs") or {}
        shared = payload.get("shared")
        if shared and self.arena_fd is not None:
            views = _arena_views(self.arena_fd, shared)
            natives = [shared_native(ad, v, self.device) if v is not None
                       else native_value(ad, a, self.device) for a, v in zip(arrays, views)]
            arrays = [np.array(v) if v is not None else a for a, v in zip(arrays, views)]
        else:
            natives = [native_value(ad, a, self.device) for a in arrays]
        if payload.get("layout"):
            natives = [ad.relayout(n, payload["layout"]) if ad.is_array(n) else n for n in natives]
        flags = self.late_writes()
        out, seconds, more = self.invoke(natives, kwargs, payload)
        return self.inspect(out, arrays, natives, flags + more, seconds)

    def invoke(self, natives: list, kwargs: dict, payload: dict, fn=None):
        """Call the kernel on fresh native inputs; returns (output, seconds, flags)
        with the flags for process-wide tampering (state, patches, introspection)."""
        ad = self.adapter
        fn = fn or self.fn
        if payload.get("poison"):
            ad.poison(payload.get("poison_bytes", 1 << 20))
            self._poison_device(payload.get("poison_bytes", 1 << 20))
        ad.synchronize(self.device)
        spy = self.introspection
        if spy is not None:
            spy.seen = set()
            spy.active = True
        try:
            t0 = time.perf_counter()
            out = fn(*natives, **kwargs)
            ad.synchronize(self.device)
            seconds = time.perf_counter() - t0
        finally:
            if spy is not None:
                spy.active = False
        flags = []
        # process-wide state the kernel may have flipped (now, or when it was imported)
        after = self._state()
        expected = dict(self.base_state)
        if self.grad_expected is not None and "torch.grad_enabled" in expected:
            expected["torch.grad_enabled"] = self.grad_expected  # the caller's own no_grad
        for key, before in expected.items():
            if after.get(key) != before:
                flags.append(f"state:{key}")
        if flags:
            ad.restore(self.base_state)
            _restore_torch_switches(self.base_state)
        now = _snapshot_numpy()
        patched = [k for k, v in now.items() if k in self.numpy_ids and v != self.numpy_ids[k]]
        if patched:
            flags.append("patched:" + ",".join(patched))
        if spy is not None and spy.seen:
            flags.append("introspect:" + ",".join(sorted(spy.seen)))
        return out, seconds, flags

    def inspect(self, out, arrays: list, natives: list, flags: list, seconds: float):
        """Inputs unchanged, output an array that aliases no input and whose
        elements do not share memory; the reply to send back."""
        ad = self.adapter
        if isinstance(out, (tuple, list)) and len(out) == 1:
            out = out[0]
        if ad.is_array(out):
            # an output in an input's memory first: the more specific diagnosis of an
            # in-place kernel, which also changes that input
            for i in ad.shares_memory(out, list(natives)):
                flags.append(f"aliased-output:{i}")
        for i, (orig, nat) in enumerate(zip(arrays, natives)):
            if not isinstance(orig, np.ndarray):
                continue  # a plain Python argument (a size, a flag) cannot be written to
            back, _ = ad.to_numpy(nat) if ad.is_array(nat) else (None, None)
            if back is None or not _same_bits(np.asarray(back), np.asarray(orig)):
                flags.append(f"mutated-input:{i}")
        if not ad.is_array(out):
            return "bad-output", {"type": type(out).__name__, "flags": flags, "seconds": seconds}
        arr, meta = ad.to_numpy(out)
        self.last_out = (out, arr)
        unit = arr.itemsize if ad.name == "numpy" else 1
        if overlapping(meta.get("shape", arr.shape), meta.get("strides", ()), unit):
            flags.append(f"strides:{tuple(meta.get('strides', ()))}")
        return "ok", {"out": arr, "meta": meta, "flags": flags, "seconds": seconds}

    def _poison_device(self, nbytes: int) -> None:
        """The adapter poisons host memory; on an accelerator, leave NaN-filled
        blocks in the framework's caching allocator too."""
        if self.adapter.name != "torch" or self.device in ("cpu", "", None):
            return
        import torch
        n = max(1, nbytes // 4)
        junk = [torch.full((n,), float("nan"), device=self.device) for _ in range(2)]
        del junk


def loaded_files() -> list:
    """The source files of every module loaded in this process (the parent decides which
    of them to list and hashes them itself)."""
    files = set()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if isinstance(f, str) and f:
            files.add(os.path.abspath(f))
    return sorted(files)


def serve(fd: int, arena_fd: int | None = None, worker: "Worker | None" = None,
          verbs: "dict | None" = None) -> None:
    """Answer the parent's requests on ``fd`` until it says exit.  ``worker``: a
    :class:`Worker` (subclass) to serve; ``verbs``: extra verbs, name -> fn(payload) ->
    (status, payload) (the trace worker's ``trace``)."""
    from multiprocessing.connection import Connection
    conn = Connection(fd)
    worker = worker if worker is not None else Worker()
    worker.arena_fd = arena_fd
    extra = dict(verbs or {})
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
            elif verb == "modules":
                reply = ("ok", {"files": loaded_files(), "flags": worker.late_writes()})
            elif verb == "exit":
                conn.send(("ok", {}))
                return
            elif verb in extra:
                reply = extra[verb](payload)
            else:
                reply = ("raised", {"type": "ProtocolError", "message": f"unknown verb {verb}"})
        except BaseException as exc:  # the kernel's exception, reported as data
            if isinstance(exc, KeyboardInterrupt):
                raise
            tb = traceback.format_exc(limit=8)
            reply = ("raised", {"type": type(exc).__name__, "message": str(exc)[:2000],
                                "traceback": tb[-4000:]})
        try:
            # protocol 5 keeps an array's byte order (older protocols hand the parent a
            # native copy, hiding a '>f4' output)
            conn.send_bytes(pickle.dumps(reply, protocol=5))
        except Exception as exc:  # unpicklable output etc.
            conn.send(("raised", {"type": "TransportError",
                                  "message": f"could not return the kernel's result: {exc}"}))


if __name__ == "__main__":  # pragma: no cover - exercised through the sandbox
    serve(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None)
