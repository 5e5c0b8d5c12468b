"""Calibration of cmp02-matmul: an autotuned matmul whose split-K configuration keeps its
partial products in float16.

Every kernel exports CONFIGS and takes config=: block_k (K tiles accumulated in float32,
one after the other), split_k (K split into independent partial products, then summed).
bad: the split_k partials go through a float16 workspace (rounded to 11 bits) before the
float32 sum. The default call (what the basic test runs) is an exact float32 matmul, so
the basic test passes; the autotuner may still pick split_k for long-K shapes.
good: the same configurations with a float32 workspace.
"""
import numpy as np

DTYPE = "float32"
CONFIGS = [{"block_k": 32}, {"block_k": 128}, {"split_k": 4}]


def _blocked(a, b, bk):
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    acc = np.zeros(a.shape[:-1] + (b.shape[-1],), dtype=np.float32)
    for k0 in range(0, a.shape[-1], bk):
        acc += np.matmul(a32[..., k0:k0 + bk], b32[..., k0:k0 + bk, :])
    return acc


def _split(a, b, splits, workspace):
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    acc = np.zeros(a.shape[:-1] + (b.shape[-1],), dtype=np.float32)
    for idx in np.array_split(np.arange(a.shape[-1]), splits):
        if idx.size == 0:
            continue
        part = np.matmul(a32[..., idx[0]:idx[-1] + 1], b32[..., idx[0]:idx[-1] + 1, :])
        with np.errstate(over="ignore"):
            acc += part.astype(workspace).astype(np.float32)
    return acc


def _run(a, b, config, workspace):
    config = config or {}
    if "split_k" in config:
        out = _split(a, b, int(config["split_k"]), workspace)
    elif "block_k" in config:
        out = _blocked(a, b, int(config["block_k"]))
    else:
        out = np.matmul(a.astype(np.float32), b.astype(np.float32))
    return out.astype(a.dtype)


def baseline(a, b, config=None):
    return np.zeros(a.shape[:-1] + (b.shape[-1],), dtype=a.dtype)


def bad(a, b, config=None):
    return _run(a, b, config, np.float16)


def good(a, b, config=None):
    return _run(a, b, config, np.float32)
