"""The adapter interface: one small class per framework.

Adapters run inside the isolated worker (array in/out, state snapshots) and in
the parent (environment capture).  The core never imports a framework; the
torch adapter imports torch lazily.
"""
from __future__ import annotations

import os
import platform
import sys
from typing import Any

import numpy as np


class Adapter:
    name = "abstract"
    #: what ``available()`` needs, for the error message when it is missing
    requirement = "nothing"
    #: device names this framework accepts (the first is the default); ``NAME:INDEX`` too
    DEVICES: tuple[str, ...] = ("cpu",)

    def available(self) -> bool:
        return True

    def to_native(self, arr: np.ndarray, device: str) -> Any:
        raise NotImplementedError

    def to_numpy(self, value: Any) -> tuple[np.ndarray, dict]:
        """Output back to numpy plus metadata: dtype name, shape, device, strides."""
        raise NotImplementedError

    def shares_memory(self, out: Any, inputs: list) -> list[int]:
        """Indices of inputs that ``out`` aliases."""
        return []

    def is_array(self, value: Any) -> bool:
        raise NotImplementedError

    #: memory layouts an input can be given in besides the contiguous one (C-CMP-03)
    LAYOUTS = ("transposed", "strided")

    def relayout(self, x: Any, layout: str) -> Any:
        """The same values as ``x`` in another memory layout: ``transposed`` (the last two
        axes stored column-major), ``strided`` (every other element of a buffer twice as
        wide along the last axis, the gaps poisoned with NaN, or the largest integer).
        Arrays with too few axes for a layout come back unchanged."""
        raise NotImplementedError

    def state(self) -> dict:
        """Process-wide numeric state a kernel could flip (compared before/after a call)."""
        return {"numpy_errstate": dict(np.geterr()), "ftz": flush_to_zero_active()}

    def restore(self, state: dict) -> None:
        np.seterr(**state["numpy_errstate"])

    def poison(self, nbytes: int) -> None:
        """Leave NaN-filled memory in the allocator, so output buffers a kernel
        allocates without writing (``empty``) are likely to hold NaN, not zeros
        or an earlier result."""
        n = max(1, nbytes // 8)
        junk = [np.full(n, np.nan) for _ in range(2)]
        del junk

    def synchronize(self, device: str) -> None:
        pass

    def environment(self, device: str) -> dict:
        return base_environment()


def flush_to_zero_active() -> bool:
    """True if subnormals are flushed (FTZ/DAZ) in this thread right now."""
    tiny = np.array([1e-39], dtype=np.float32)  # a float32 subnormal
    return bool((tiny * np.float32(1.0))[0] == 0.0)


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_flags() -> list[str]:
    wanted = {"avx", "avx2", "avx512f", "fma", "f16c", "avx512_bf16", "amx_bf16", "sve", "neon",
              "asimd"}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return sorted(set(line.split(":", 1)[1].split()) & wanted)
    except OSError:
        pass
    return []


def base_environment() -> dict:
    import ml_dtypes
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "cpu_flags": cpu_flags(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "ml_dtypes": ml_dtypes.__version__,
    }
