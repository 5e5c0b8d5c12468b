"""The recorder: every aten op a model's forward pass dispatches, as plain data.

Runs inside the trace worker (:mod:`.worker`), never in the checker's process.  A
``TorchDispatchMode`` sees each aten op after autograd and before the backend's kernel,
so it records the op as the stack under test receives it: the op's name, its tensor
arguments (shape, dtype, strides, a summary and a content hash), its other arguments,
its outputs, and where in the module tree the call was made (forward pre-hooks and
hooks keep a stack of qualified module names).  Tensors themselves are kept, once per
content hash, while a byte budget lasts.  An op that raises is recorded with the error
and the exception goes on (the forward pass fails as it would without the recorder).
"""
from __future__ import annotations

import hashlib
from typing import Any, Optional

import numpy as np

#: default budget for the tensors a trace keeps (bytes)
DEFAULT_BUDGET = 64 << 20


def _torch():
    import torch
    return torch


_ADAPTER = None


def tensor_bytes(t) -> tuple[np.ndarray, str]:
    """A tensor's values as a contiguous numpy array (bfloat16/fp8 through ml_dtypes) and
    the sha256 of its dtype, shape and bytes."""
    global _ADAPTER
    if _ADAPTER is None:
        from ..adapters.torch_adapter import TorchAdapter
        _ADAPTER = TorchAdapter()
    arr, _ = _ADAPTER.to_numpy(t)
    arr = np.ascontiguousarray(arr)
    h = hashlib.sha256(f"{arr.dtype.name}|{arr.shape}|".encode())
    h.update(arr.tobytes())
    return arr, h.hexdigest()


def summarize(arr: np.ndarray) -> dict:
    """min, max, mean, max |x|, and the NaN and Inf counts of a float array (integers:
    min and max)."""
    if arr.size == 0:
        return {"size": 0}
    if arr.dtype.kind in "iub":
        return {"size": int(arr.size), "min": int(arr.min()), "max": int(arr.max())}
    x = arr if arr.dtype.kind == "f" and arr.dtype.itemsize >= 4 else arr.astype(np.float32)
    fin = np.isfinite(x)
    n_fin = int(np.count_nonzero(fin))
    out = {"size": int(x.size), "nan": int(np.count_nonzero(np.isnan(x))) if n_fin < x.size
           else 0}
    out["inf"] = x.size - n_fin - out["nan"]
    if n_fin:
        f = x if n_fin == x.size else x[fin]
        lo, hi = float(f.min()), float(f.max())
        out.update({"min": lo, "max": hi, "mean": float(f.mean(dtype=np.float64)),
                    "absmax": max(abs(lo), abs(hi))})
    return out


class TensorStore:
    """Tensors by content hash, kept while the budget lasts."""

    def __init__(self, budget: int = DEFAULT_BUDGET):
        self.budget = int(budget)
        self.used = 0
        self.arrays: dict[str, np.ndarray] = {}
        self.dropped = 0
        self._seen: dict = {}

    def describe(self, t) -> dict:
        # a tensor seen before in this pass, unchanged since (same object, same version
        # counter): its description stands.  The object is held until reset(), so its
        # memory (and id) cannot be reused by another tensor meanwhile.
        key = id(t)
        seen = self._seen.get(key)
        if seen is not None and seen[0] is t and seen[1] == t._version:
            return dict(seen[2])
        ref = self._describe(t)
        self._seen[key] = (t, t._version, ref)
        return dict(ref)

    def reset(self) -> None:
        """Forget the tensors seen (their descriptions; kept arrays stay)."""
        self._seen = {}

    def _describe(self, t) -> dict:
        torch = _torch()
        arr, digest = tensor_bytes(t)
        ref = {"shape": list(t.shape), "dtype": arr.dtype.name, "strides": list(t.stride()),
               "device": str(t.device), "sha256": digest, "summary": summarize(arr)}
        if digest in self.arrays:
            ref["stored"] = True
        elif self.used + arr.nbytes <= self.budget:
            self.arrays[digest] = arr
            self.used += arr.nbytes
            ref["stored"] = True
        else:
            self.dropped += 1
            ref["stored"] = False
        del torch
        return ref


def plain(value: Any, store: TensorStore) -> Any:
    """An argument as JSON-able data; tensors become tensor references."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return {"tensor": store.describe(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v, store) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v, store) for k, v in value.items()}
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return {"float": repr(value)}
    return {"repr": str(value)}


class ModuleStack:
    """Qualified names of the modules whose forward is running (hooks keep it)."""

    def __init__(self, model):
        self.stack: list[str] = []
        self.handles = []
        for name, mod in model.named_modules():
            self.handles.append(mod.register_forward_pre_hook(self._enter(name)))
            self.handles.append(mod.register_forward_hook(self._leave(name), always_call=True))

    def _enter(self, name):
        def hook(module, args):
            self.stack.append(name)
        return hook

    def _leave(self, name):
        def hook(module, args, output):
            if self.stack and self.stack[-1] == name:
                self.stack.pop()
        return hook

    @property
    def path(self) -> str:
        return self.stack[-1] if self.stack else ""

    def reset(self) -> None:
        self.stack = []

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def make_mode(ops: list, store: TensorStore, modules: Optional[ModuleStack], trial: int):
    """A dispatch mode that appends one record per aten op call to ``ops``."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            rec = {"index": len(ops), "trial": trial, "op": str(func),
                   "module": modules.path if modules is not None else "",
                   "args": plain(list(args), store), "kwargs": plain(kwargs, store)}
            ops.append(rec)
            try:
                out = func(*args, **kwargs)
            except Exception as exc:
                rec.update({"status": "raised", "error_type": type(exc).__name__,
                            "error": str(exc).splitlines()[0][:400] if str(exc) else ""})
                raise
            rec["status"] = "ok"
            rec["outputs"] = plain(list(out) if isinstance(out, (tuple, list)) else [out], store)
            return out

    return Recorder()
