"""The isolated worker for KernelBench candidates: builds ``ModelNew`` and calls it.

Run as ``python -m kcontract.integrations.kernelbench.worker FD`` (see :mod:`kcontract.check.worker`
for the transport and the integrity checks it shares).  Verbs:

``load``
    import the candidate file (it must define ``ModelNew``); the torch allocator
    fills uninitialised memory on the CPU, an audit hook watches for frame reads.
``build``
    ``torch.manual_seed(seed); ModelNew(*init_inputs)``, then the reference's
    weights (already rounded to the dtype) when names and shapes match, ``.to(dtype)``,
    ``.eval()`` (the reference is checked in eval mode too: dropout off on both sides), or
    ``.train()`` with ``train`` (``--train``: then every call carries ``rng_seed``, the seed
    the reference's forward pass on the same inputs ran under, set just before the call).
``call``
    the kernel worker's call (:mod:`kcontract.check.worker`: inputs in the shared arena,
    late writes, the same integrity flags), one forward pass under ``torch.no_grad()``;
    ``modules`` and ``ping`` are the kernel worker's too.
``order``
    run the reference model here *first*, then the candidate, on one input:
    what a checker that shares one process between them (KernelBench) lets a
    candidate see.  Only used after every isolated measurement is done.
``kernelbench``
    KernelBench's own correctness check, reproduced (same process, reference
    first, shared input tensors, ``torch.rand``-style inputs from ``get_inputs``,
    ``allclose`` at fixed tolerances, five trials): the column "what KernelBench
    would have said".

The float64 oracle never enters this process.
"""
from __future__ import annotations

import sys

import numpy as np

from ...check import worker as check_worker
from ...check.worker import Worker, kernel_identity, resolve_kernel
from ...check.worker import native_value as _native_value


def _torch():
    import torch
    return torch


class ModelWorker(Worker):
    """A :class:`~kcontract.check.worker.Worker` whose kernel is a built ``ModelNew``."""

    def __init__(self):
        super().__init__()
        self.cls = None
        self.module = None
        self.dtype = "float32"
        self.build_info: dict = {}
        self.reference = None  # the problem module, loaded only for `order`/`kernelbench`
        self.grad_expected = False  # calls run under torch.no_grad()
        self.train = False  # the model's mode (build: eval unless --train)

    # -- lifecycle --------------------------------------------------------------------
    def load(self, payload):
        payload = dict(payload, framework="torch")
        info = super().load(payload)
        self.cls, self.module = self.fn, sys.modules.get(info.get("module", "")) or None
        self.fn = None
        self.dtype = payload.get("dtype") or "float32"
        return info

    def build(self, payload):
        torch = _torch()
        from ...adapters.torch_adapter import TorchAdapter
        ad = TorchAdapter()
        init = [_native_value(ad, v) for v in payload.get("init_inputs") or []]
        torch.manual_seed(int(payload.get("seed", 42)))
        model = self.cls(*init)
        loaded = False
        state = payload.get("state")
        if state and isinstance(model, torch.nn.Module):
            own = model.state_dict()
            if set(own) == set(state) and all(tuple(own[k].shape) == tuple(np.shape(v))
                                               for k, v in state.items()):
                model.load_state_dict({k: ad.to_native(v, "cpu") for k, v in state.items()})
                loaded = True
        self.train = bool(payload.get("train"))
        if isinstance(model, torch.nn.Module):
            model = model.to(device=self.device, dtype=getattr(torch, self.dtype))
            model = model.train(self.train)
        self.fn = model
        # what building the model did to process state is the candidate's doing too
        self.build_info = {"weights": "reference" if loaded else "seeded",
                           "parameters": sum(p.numel() for p in model.parameters())
                           if isinstance(model, torch.nn.Module) else 0}
        return self.build_info

    # -- calls --------------------------------------------------------------------------
    def invoke(self, natives: list, kwargs: dict, payload: dict, fn=None):
        """The base worker's call (see :meth:`~kcontract.check.worker.Worker.call`: the
        input arena, late writes, the integrity flags), on the built model, under
        ``torch.no_grad()`` and the seed of ``rng_seed`` when the call carries one."""
        if self.fn is None:
            raise ProtocolError("call before build")
        with _torch().no_grad():
            return super().invoke(natives, kwargs, payload, fn=fn or self._seeded(payload))

    def _seeded(self, payload):
        """The model, under the seed the reference ran with in training mode (``rng_seed``:
        the same dropout masks on both sides); as it is otherwise."""
        if "rng_seed" not in payload:
            return self.fn
        torch, fn, seed = _torch(), self.fn, int(payload["rng_seed"])

        def seeded(*args, **kwargs):
            torch.manual_seed(seed)
            return fn(*args, **kwargs)
        return seeded

    def order(self, payload):
        """The reference runs first in this process, then the candidate, same inputs.
        A failure of the reference itself is a ``ReferenceUnavailable``, never confused with
        the candidate's."""
        torch = _torch()
        ad = self.adapter
        arrays = payload["args"]
        natives = [_native_value(ad, a, self.device) for a in arrays]
        with torch.no_grad():
            try:
                ref_module = self._reference(payload["reference"], payload.get("source"))
                init = [_native_value(ad, v) for v in payload.get("init_inputs") or []]
                torch.manual_seed(int(payload.get("seed", 42)))
                ref = ref_module.Model(*init).to(device=self.device,
                                                 dtype=getattr(torch, self.dtype))
                ref = ref.train(self.train) if isinstance(ref, torch.nn.Module) else ref
                if "rng_seed" in payload:
                    torch.manual_seed(int(payload["rng_seed"]))
                ref_out = ref(*natives)
            except Exception as exc:
                raise ReferenceUnavailable(f"{type(exc).__name__}: {exc}") from exc
            del ref_out  # freed: its memory is what a lazy candidate would find
            out, seconds, flags = self.invoke(natives, {}, payload, fn=self._seeded(payload))
        return self.inspect(out, arrays, natives, flags, seconds)

    def kernelbench(self, payload):
        """KernelBench's correctness check, reproduced as faithfully as a CPU allows."""
        torch = _torch()
        ref_module = self._reference(payload["reference"], payload.get("source"))
        dtype = getattr(torch, self.dtype)
        device = self.device
        seed, trials = int(payload.get("seed", 42)), int(payload.get("trials", 5))
        atol, rtol = float(payload["atol"]), float(payload["rtol"])
        # KernelBench poisons nothing and fills nothing: switch the worker's guards off
        torch.use_deterministic_algorithms(False)
        _malloc_perturb(0)
        result = {"trials": trials, "passed_trials": 0, "atol": atol, "rtol": rtol,
                  "max_difference": 0.0, "message": ""}
        try:
            init_inputs = ref_module.get_init_inputs()
            torch.manual_seed(seed)
            original_model = ref_module.Model(*init_inputs).to(device=device, dtype=dtype)
            torch.manual_seed(seed)
            custom_model = self.cls(*init_inputs).to(device=device, dtype=dtype)
            torch.manual_seed(seed)
            trial_seeds = [torch.randint(0, 2 ** 32 - 1, (1,)).item() for _ in range(trials)]
            with torch.no_grad():
                for trial in range(trials):
                    torch.manual_seed(trial_seeds[trial])
                    inputs = ref_module.get_inputs()
                    inputs = [x.to(device=device, dtype=dtype) if isinstance(x, torch.Tensor)
                              and x.is_floating_point() else x for x in inputs]
                    torch.manual_seed(trial_seeds[trial])
                    output = original_model(*inputs)
                    torch.manual_seed(trial_seeds[trial])
                    output_new = custom_model(*inputs)
                    if output.shape != output_new.shape:
                        result["message"] = (f"trial {trial}: output shape mismatch: expected "
                                             f"{tuple(output.shape)}, got {tuple(output_new.shape)}")
                        break
                    diff = (output.double() - output_new.double()).abs()
                    result["max_difference"] = max(result["max_difference"],
                                                   float(torch.nan_to_num(diff, nan=float("inf"))
                                                         .max()) if diff.numel() else 0.0)
                    if torch.allclose(output, output_new, atol=atol, rtol=rtol):
                        result["passed_trials"] += 1
                    else:
                        result["message"] = (f"trial {trial}: outputs differ (max difference "
                                             f"{result['max_difference']:.3g})")
                        break
        except Exception as exc:  # the candidate's failure is KernelBench's 'incorrect'
            result["message"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        result["passed"] = result["passed_trials"] == trials
        return "ok", result

    def _reference(self, path: str, source=None):
        """The problem module: the file, or its source with the sizes scaled (``--scale``)."""
        if self.reference is None:
            if source is not None:
                from .scale import exec_source
                self.reference = exec_source(path, source)
            else:
                _, self.reference = resolve_kernel(f"{path}:Model")
        return self.reference


class ProtocolError(Exception):
    """A request the worker cannot answer in its state (a call before the build)."""


class ReferenceUnavailable(Exception):
    """The reference model could not load or run in the candidate's process."""


def _malloc_perturb(value: int) -> None:
    """glibc's MALLOC_PERTURB_ at run time (``mallopt(M_PERTURB, value)``); a no-op
    elsewhere."""
    try:
        import ctypes
        ctypes.CDLL(None).mallopt(-6, int(value))
    except Exception:  # pragma: no cover - not glibc
        pass


def serve(fd: int, arena_fd: "int | None" = None) -> None:
    """The base worker's loop (:func:`kcontract.check.worker.serve`: ``load``, ``call``,
    ``modules``, ``ping``, the shared input arena) with this worker's verbs."""
    worker = ModelWorker()
    check_worker.serve(fd, arena_fd, worker=worker,
                       verbs={"build": lambda p: ("ok", worker.build(p)), "order": worker.order,
                              "kernelbench": worker.kernelbench})


__all__ = ["ModelWorker", "kernel_identity", "serve"]

if __name__ == "__main__":  # pragma: no cover - exercised through the parent
    serve(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None)
