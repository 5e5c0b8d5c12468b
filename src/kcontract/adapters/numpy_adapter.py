"""numpy: arrays in, arrays out (ml_dtypes for bfloat16 and fp8)."""
from __future__ import annotations

import numpy as np

from .base import Adapter, base_environment


class NumpyAdapter(Adapter):
    name = "numpy"

    def to_native(self, arr, device):
        if device not in ("cpu", None, ""):
            from ..errors import UsageError
            raise UsageError(f"--framework numpy runs on the cpu only, not on {device!r}")
        return np.array(arr, copy=True)

    def relayout(self, x, layout):
        if layout == "contiguous" or not isinstance(x, np.ndarray) or x.ndim == 0:
            return x
        if layout == "transposed":
            return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2) if x.ndim >= 2 else x
        if layout == "strided":
            buf = np.empty(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype)
            buf.fill(np.iinfo(x.dtype).max if x.dtype.kind in "iu"
                     else True if x.dtype.kind == "b" else np.nan)
            view = buf[..., ::2]
            view[...] = x
            return view
        raise ValueError(f"unknown layout {layout!r}")

    def is_array(self, value):
        return isinstance(value, np.ndarray) or isinstance(value, np.generic)

    def to_numpy(self, value):
        arr = np.asarray(value)
        meta = {"dtype": arr.dtype.name, "shape": tuple(arr.shape), "device": "cpu",
                "strides": tuple(arr.strides), "contiguous": bool(arr.flags.c_contiguous)}
        return np.array(arr, copy=True), meta

    def shares_memory(self, out, inputs):
        if not isinstance(out, np.ndarray):
            return []
        return [i for i, x in enumerate(inputs)
                if isinstance(x, np.ndarray) and np.shares_memory(out, x)]

    def environment(self, device):
        env = base_environment()
        env.update({"framework": "numpy", "device": "cpu", "device_name": env["cpu"]})
        try:
            import threadpoolctl  # optional
            env["blas"] = [{"api": i.get("internal_api"), "threads": i.get("num_threads")}
                           for i in threadpoolctl.threadpool_info()]
        except Exception:
            pass
        return env
