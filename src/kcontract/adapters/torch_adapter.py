"""torch: tensors on any device torch accepts; imported lazily."""
from __future__ import annotations

import numpy as np

from .base import Adapter, base_environment, flush_to_zero_active

# numpy storage dtype name -> (torch dtype attribute, integer view dtype for transfer)
_VIEW = {"bfloat16": ("bfloat16", np.int16), "float8_e4m3fn": ("float8_e4m3fn", np.uint8),
         "float8_e5m2": ("float8_e5m2", np.uint8)}
_TORCH_TO_NP = {"torch.bfloat16": "bfloat16", "torch.float8_e4m3fn": "float8_e4m3fn",
                "torch.float8_e5m2": "float8_e5m2"}


def _torch():
    import torch  # noqa: WPS433 - lazy on purpose
    return torch


class TorchAdapter(Adapter):
    name = "torch"
    requirement = "torch"
    DEVICES = ("cpu", "cuda", "mps", "xpu", "npu")

    def available(self):
        try:
            _torch()
            return True
        except ImportError:
            return False

    def to_native(self, arr, device):
        torch = _torch()
        shape = np.shape(arr)
        arr = np.ascontiguousarray(arr).reshape(shape)  # keeps a 0-d array 0-d
        name = arr.dtype.name
        if name in _VIEW:
            tdt, view = _VIEW[name]
            t = torch.from_numpy(arr.view(view).copy()).view(getattr(torch, tdt))
        else:
            t = torch.from_numpy(arr.copy())
        return t.to(device)

    def relayout(self, x, layout):
        torch = _torch()
        if layout == "contiguous" or not isinstance(x, torch.Tensor) or x.dim() == 0:
            return x
        if layout == "transposed":
            return x.transpose(-1, -2).contiguous().transpose(-1, -2) if x.dim() >= 2 else x
        if layout == "strided":
            if x.dtype == torch.bool:
                fill = True  # the gaps hold a value a reader of them would notice
            elif x.dtype.is_floating_point or x.dtype.is_complex:
                fill = float("nan")
            else:
                fill = torch.iinfo(x.dtype).max
            buf = torch.full(tuple(x.shape[:-1]) + (2 * x.shape[-1],), fill, dtype=x.dtype,
                             device=x.device)
            view = buf[..., ::2]
            view.copy_(x)
            return view
        raise ValueError(f"unknown layout {layout!r}")

    def is_array(self, value):
        return isinstance(value, _torch().Tensor)

    def to_numpy(self, value):
        torch = _torch()
        t = value
        meta = {"dtype": _TORCH_TO_NP.get(str(t.dtype), str(t.dtype).replace("torch.", "")),
                "shape": tuple(t.shape), "device": str(t.device), "strides": tuple(t.stride()),
                "contiguous": bool(t.is_contiguous())}
        t = t.detach().to("cpu").contiguous()
        key = str(t.dtype)
        if key in _TORCH_TO_NP:
            import ml_dtypes
            np_name = _TORCH_TO_NP[key]
            view = torch.int16 if np_name == "bfloat16" else torch.uint8
            arr = t.view(view).numpy().view(getattr(ml_dtypes, np_name)).copy()
        else:
            arr = t.numpy().copy()
        return arr, meta

    def shares_memory(self, out, inputs):
        torch = _torch()
        if not isinstance(out, torch.Tensor):
            return []
        hits = []
        try:
            o0 = out.untyped_storage().data_ptr()
        except Exception:  # pragma: no cover - exotic tensors
            return []
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                try:
                    if x.untyped_storage().data_ptr() == o0:
                        hits.append(i)
                except Exception:  # pragma: no cover
                    pass
        return hits

    def state(self):
        torch = _torch()
        st = super().state()
        st.update({"torch_threads": torch.get_num_threads(),
                   "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
                   "default_dtype": str(torch.get_default_dtype()),
                   "matmul_precision": torch.get_float32_matmul_precision()})
        return st

    def restore(self, state):
        torch = _torch()
        super().restore(state)
        if flush_to_zero_active() and not state.get("ftz"):
            torch.set_flush_denormal(False)
        torch.set_num_threads(state["torch_threads"])
        torch.use_deterministic_algorithms(state["deterministic_algorithms"])
        torch.set_default_dtype(getattr(torch, state["default_dtype"].replace("torch.", "")))
        torch.set_float32_matmul_precision(state["matmul_precision"])

    def poison(self, nbytes):
        torch = _torch()
        n = max(1, nbytes // 4)
        junk = [torch.full((n,), float("nan")) for _ in range(2)]
        del junk

    def synchronize(self, device):
        torch = _torch()
        if device.startswith("cuda") and torch.cuda.is_available():
            torch.cuda.synchronize()

    def environment(self, device):
        env = base_environment()
        try:
            torch = _torch()
        except ImportError:
            env.update({"framework": "torch", "torch": None})
            return env
        env.update({"framework": "torch", "torch": torch.__version__, "device": device,
                    "device_name": env["cpu"], "torch_threads": torch.get_num_threads()})
        if device.startswith("cuda") and torch.cuda.is_available():
            idx = torch.device(device).index or 0
            env["device_name"] = torch.cuda.get_device_name(idx)
            env["cuda_runtime"] = torch.version.cuda
            env["cudnn"] = torch.backends.cudnn.version()
            env["driver"] = getattr(torch.cuda, "driver_version", lambda: None)() if hasattr(
                torch.cuda, "driver_version") else None
        elif device.startswith("mps"):
            env["device_name"] = "Apple MPS"
        return env
