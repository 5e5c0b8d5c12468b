"""Devices in a fan-out: which visibility variable restricts which accelerator, how
local worker processes share the visible devices, and which Ray resource a cell of a
device requests so a heterogeneous cluster runs it where that device is.

Device names are the framework's own (torch ``cuda``, ``xpu``, ``npu``, ``mps``; jax
``gpu``, ``tpu``), optionally with an index (``cuda:1``).
"""
from __future__ import annotations

import os
from typing import Mapping, Optional

#: device kind -> the variables that restrict which of its devices a process sees, in
#: the order they are looked for (ROCm honours HIP_ and ROCR_, Ascend ASCEND_RT_)
VISIBILITY_VARS: dict[str, tuple[str, ...]] = {
    "cuda": ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"),
    "gpu": ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"),
    "npu": ("ASCEND_RT_VISIBLE_DEVICES",),
    "tpu": ("TPU_VISIBLE_CHIPS",),
}
ALL_VISIBILITY_VARS = tuple(dict.fromkeys(v for vs in VISIBILITY_VARS.values() for v in vs))

#: device kind -> the Ray resources one cell of that device requests (besides one CPU);
#: Ray itself sets the visibility variable of the accelerator it hands a task
RAY_RESOURCES: dict[str, dict[str, float]] = {
    "cpu": {},
    "cuda": {"GPU": 1}, "gpu": {"GPU": 1},
    "tpu": {"TPU": 1}, "npu": {"NPU": 1},
    "xpu": {"GPU": 1}, "mps": {"mps": 1},
}


def kind(device: str) -> str:
    return (device or "cpu").partition(":")[0]


def visibility(env: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The visibility variables set in ``env`` (default: this process)."""
    env = os.environ if env is None else env
    return {v: env[v] for v in ALL_VISIBILITY_VARS if v in env}


def visible_ids(device: str, env: Optional[Mapping[str, str]] = None) -> tuple[Optional[str], list[str]]:
    """(the variable, the device ids it lists) for ``device``'s kind; (None, []) when no
    variable restricts it."""
    env = os.environ if env is None else env
    for var in VISIBILITY_VARS.get(kind(device), ()):
        if var in env:
            return var, [d.strip() for d in env[var].split(",") if d.strip()]
    return None, []


def worker_environments(device: str, workers: int,
                        env: Optional[Mapping[str, str]] = None) -> list[dict[str, str]]:
    """Environment updates for ``workers`` local processes on ``device``: where a
    visibility variable lists several devices and the device names no index, the
    devices are dealt out round-robin, one per process; otherwise every process sees
    what this one sees (an explicit index, or no restriction to divide)."""
    var, ids = visible_ids(device, env)
    if var is None or len(ids) < 2 or ":" in (device or ""):
        return [{} for _ in range(workers)]
    return [{var: ids[i % len(ids)]} for i in range(workers)]


def ray_resources(device: str, extra: Optional[Mapping[str, float]] = None) -> dict:
    """``.options(...)`` for a Ray task of a cell on ``device``: one CPU, the device's
    accelerator resource, and any ``extra`` custom resources (``--ray-resource``)."""
    want = dict(RAY_RESOURCES.get(kind(device), {kind(device): 1}))
    want.update(extra or {})
    opts: dict = {"num_cpus": 1}
    if "GPU" in want:
        opts["num_gpus"] = want.pop("GPU")
    if want:
        opts["resources"] = want
    return opts
