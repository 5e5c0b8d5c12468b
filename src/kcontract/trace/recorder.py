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


def tensor_bytes(t) -> tuple[np.ndarray, str]:
    """A tensor's values as a contiguous numpy array (bfloat16/fp8 through ml_dtypes) and
    the sha256 of its dtype, shape and bytes."""
    from ..adapters.torch_adapter import TorchAdapter
    arr, _ = TorchAdapter().to_numpy(t)
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
        a = arr.astype(np.int64)
        return {"size": int(a.size), "min": int(a.min()), "max": int(a.max())}
    x = arr.astype(np.float64)
    fin = np.isfinite(x)
    out = {"size": int(x.size), "nan": int(np.isnan(x).sum()), "inf": int(np.isinf(x).sum())}
    if fin.any():
        f = x[fin]
        out.update({"min": float(f.min()), "max": float(f.max()), "mean": float(f.mean()),
                    "absmax": float(np.abs(f).max())})
    return out


class TensorStore:
    """Tensors by content hash, kept while the budget lasts."""

    def __init__(self, budget: int = DEFAULT_BUDGET):
        self.budget = int(budget)
        self.used = 0
        self.arrays: dict[str, np.ndarray] = {}
        self.dropped = 0

    def describe(self, t) -> dict:
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
