"""The trace worker: the model's own process, with the stack under test configured.

Run as ``python -m kcontract.trace.worker FD`` (the transport and integrity checks are
:mod:`kcontract.check.worker`'s).  ``load`` first runs the prelude (a Python file that
configures the stack: ``torch.set_float32_matmul_precision``, flush-to-zero, a backend's
own settings or kernels), then imports the model file or, for ``kcontract trace
--check``, a kernel; every later call sees the configured stack.  Verbs:

``load``   prelude, then the model (``MODEL.py:Model``) or the kernel
``trace``  build ``Model(*get_init_inputs())`` under ``torch.manual_seed(seed)`` and run
           one forward pass per trial on ``get_inputs()`` (seeded per trial) under the
           recorder (:mod:`.recorder`); the reply's ``meta`` holds the records and the
           kept tensors
``call``   a kernel call, as in the checker's worker
"""
from __future__ import annotations

import os
import sys
import time

from ..check import worker as check_worker
from ..check.worker import Worker, load_module_file


def trial_seed(seed: int, trial: int) -> int:
    """The seed ``get_inputs()`` runs under in a trial (the same on every platform)."""
    return int(seed) * 1000 + 7919 * (int(trial) + 1)


class TraceWorker(Worker):
    def __init__(self):
        super().__init__()
        self.prelude = ""

    def load(self, payload):
        prelude = payload.get("prelude")
        if prelude and prelude != self.prelude:  # once per process (reload: another kernel)
            sys.path.insert(0, payload.get("cwd") or os.getcwd())
            load_module_file(prelude)  # what it raises is a load failure, reported as such
            self.prelude = prelude
        return super().load(payload)

    def trace(self, payload):
        import torch
        from ..adapters.torch_adapter import TorchAdapter
        from .recorder import ModuleStack, TensorStore, make_mode, tensor_bytes
        module = sys.modules.get(self.fn.__module__) if hasattr(self.fn, "__module__") else None
        if module is None or not hasattr(module, "get_inputs"):
            raise TypeError("the model file defines no get_inputs()")
        ad = TorchAdapter()
        seed = int(payload.get("seed", 0))
        init = module.get_init_inputs() if hasattr(module, "get_init_inputs") else []
        torch.manual_seed(seed)
        model = self.fn(*init)
        if isinstance(model, torch.nn.Module):
            model = model.to(self.device).eval()
        store = TensorStore(int(payload.get("budget", 64 << 20)))
        modules = ModuleStack(model) if isinstance(model, torch.nn.Module) else None
        ops: list = []
        trials = []
        traced = bool(payload.get("record", True))
        for t in range(int(payload.get("trials", 1))):
            torch.manual_seed(trial_seed(seed, t))
            inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x
                      for x in module.get_inputs()]
            row = {"trial": t, "seed": trial_seed(seed, t), "first_op": len(ops),
                   "inputs": [tensor_bytes(x)[0] if isinstance(x, torch.Tensor) else x
                              for x in inputs]}
            if modules is not None:
                modules.reset()
            store.reset()
            t0 = time.perf_counter()
            try:
                with torch.no_grad():
                    if traced:
                        with make_mode(ops, store, modules, t):
                            out = model(*inputs)
                    else:
                        out = model(*inputs)
                ad.synchronize(self.device)
                row["status"] = "ok"
                out = out[0] if isinstance(out, (tuple, list)) else out
                row["output"] = ad.to_numpy(out)[0]
            except Exception as exc:
                row.update({"status": "raised", "error_type": type(exc).__name__,
                            "error": (str(exc).splitlines() or [""])[0][:400]})
            row["seconds"] = time.perf_counter() - t0
            row["end_op"] = len(ops)
            trials.append(row)
        if modules is not None:
            modules.remove()
        return "ok", {"meta": {
            "ops": ops, "trials": trials, "tensors": store.arrays, "tensors_dropped": store.dropped,
            "tensor_bytes": store.used,
            "parameters": sum(p.numel() for p in model.parameters())
            if isinstance(model, torch.nn.Module) else 0,
            "matmul_precision": torch.get_float32_matmul_precision()}}


def serve(fd: int, arena_fd: int | None = None) -> None:
    """The checker's worker loop (:func:`kcontract.check.worker.serve`: framing, the input
    arena, integrity), serving a :class:`TraceWorker` with its ``trace`` verb."""
    worker = TraceWorker()
    check_worker.serve(fd, arena_fd, worker=worker, verbs={"trace": worker.trace})


if __name__ == "__main__":  # pragma: no cover - exercised through the parent
    serve(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None)
