"""jax: arrays on the devices JAX names (``cpu``, ``gpu``, ``tpu``, ``gpu:1``); imported lazily.

JAX turns float64 inputs into float32 unless 64-bit mode is on, so the adapter enables
``jax_enable_x64`` when it first loads JAX: a float64 kernel then sees float64.  That
setting is part of the process state the worker snapshots, like every other JAX
configuration value a kernel could flip (default matmul precision, NaN debugging,
disabled jit, dtype promotion).

JAX arrays are immutable and have no user-visible strides: a kernel cannot write to its
inputs, and ``relayout`` has no other layout to offer (it returns the array unchanged).
"""
from __future__ import annotations

import os

import numpy as np

from .base import Adapter, base_environment

#: JAX configuration values a kernel could flip, compared before and after every call
CONFIG_KEYS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_rank_promotion",
               "jax_numpy_dtype_promotion", "jax_debug_nans", "jax_debug_infs",
               "jax_disable_jit", "jax_default_prng_impl")
#: environment variables that change what JAX compiles or where it runs
ENV_KEYS = ("XLA_FLAGS", "JAX_PLATFORMS", "JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION",
            "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
            "TPU_VISIBLE_CHIPS")


def _jax():
    import jax  # noqa: WPS433 - lazy on purpose
    if not jax.config.jax_enable_x64:
        jax.config.update("jax_enable_x64", True)
    return jax


def split_device(device: str) -> tuple[str, int]:
    """``gpu:1`` -> ("gpu", 1); ``cpu`` -> ("cpu", 0)."""
    kind, _, index = (device or "cpu").partition(":")
    try:
        return kind, int(index or 0)
    except ValueError:
        from ..errors import UsageError
        raise UsageError(f"--device {device!r}: expected NAME or NAME:INDEX, e.g. gpu:1") from None


class JaxAdapter(Adapter):
    name = "jax"
    requirement = "jax and jaxlib"
    DEVICES = ("cpu", "gpu", "tpu")
    LAYOUTS = ()  # no strides to choose: every JAX array is dense

    def available(self):
        try:
            import jax  # noqa: F401
            return True
        except ImportError:
            return False

    def device(self, device: str):
        """The ``jax.Device`` that ``device`` names."""
        jax = _jax()
        kind, index = split_device(device)
        try:
            devices = jax.devices(kind)
        except RuntimeError as exc:
            from ..errors import UsageError
            raise UsageError(f"--framework jax has no {kind!r} device here "
                             f"(available: {', '.join(sorted({d.platform for d in jax.devices()}))}): "
                             f"{str(exc).splitlines()[0]}") from None
        if index >= len(devices):
            from ..errors import UsageError
            raise UsageError(f"--device {device!r}: JAX sees {len(devices)} {kind} device(s)")
        return devices[index]

    def to_native(self, arr, device):
        jax = _jax()
        arr = np.asarray(arr)
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
            arr = np.ascontiguousarray(arr)
        return jax.device_put(arr, self.device(device))

    def relayout(self, x, layout):
        return x

    def is_array(self, value):
        return isinstance(value, _jax().Array)

    def to_numpy(self, value):
        arr = np.array(value, copy=True)  # blocks until the value is ready
        try:
            where = ",".join(sorted(str(d) for d in value.devices()))
        except Exception:  # pragma: no cover - a tracer or an exotic array
            where = "?"
        strides = tuple(s * arr.itemsize for s in _c_strides(arr.shape))
        meta = {"dtype": arr.dtype.name, "shape": tuple(arr.shape), "device": where,
                "strides": strides, "contiguous": True}
        return arr, meta

    def shares_memory(self, out, inputs):
        return []  # immutable arrays: returning an input is not writing into it

    def state(self):
        jax = _jax()
        st = super().state()
        for key in CONFIG_KEYS:
            try:
                st[key] = getattr(jax.config, key)
            except AttributeError:  # pragma: no cover - an older or newer JAX
                pass
        return st

    def restore(self, state):
        jax = _jax()
        super().restore(state)
        for key in CONFIG_KEYS:
            if key in state and getattr(jax.config, key, state[key]) != state[key]:
                jax.config.update(key, state[key])

    def synchronize(self, device):
        pass  # to_numpy blocks on the value; JAX has no device-wide barrier

    def environment(self, device):
        env = base_environment()
        env.update({"framework": "jax", "device": device, "jax": None})
        try:
            jax = _jax()
            import jaxlib
        except ImportError:
            return env
        env.update({"jax": jax.__version__, "jaxlib": getattr(jaxlib, "__version__", None),
                    "jax_config": {k: v for k, v in self.state().items() if k.startswith("jax_")}})
        env.update({k.lower(): os.environ[k] for k in ENV_KEYS if k in os.environ})
        try:
            dev = self.device(device)
        except Exception as exc:  # the check reports the device error itself
            env["device_error"] = str(exc)
            return env
        env["device_name"] = env["cpu"] if dev.platform == "cpu" else getattr(dev, "device_kind", str(dev))
        env["device_kind"] = getattr(dev, "device_kind", "")
        env["platform"] = dev.platform
        try:
            import jax.extend.backend
            backend = jax.extend.backend.get_backend(dev.platform)
            env["runtime"] = getattr(backend, "platform_version", None)
        except Exception:  # pragma: no cover - API moved
            pass
        return env


def _c_strides(shape) -> list[int]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1)
    return list(reversed(strides))
