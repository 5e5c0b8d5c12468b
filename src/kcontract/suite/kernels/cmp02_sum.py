"""Calibration of cmp02-sum: an autotuned row sum whose split configuration combines the
per-block partials with bfloat16 atomic adds.

Every kernel exports CONFIGS and takes config=: block (the row reduced in blocks of that
many elements, block results added in float32), split (the row cut into that many
blocks reduced independently, their results added into the output with atomics).
bad: the split configuration's atomics add into a bfloat16 accumulator (the atomic add
available for 16-bit outputs, reused for float32), rounding every partial and every
running sum to 8 bits. The default call is a float32 sum: the basic test passes.
good: the same configurations with float32 atomics.
"""
import ml_dtypes
import numpy as np

DTYPE = "float32"
CONFIGS = [{"block": 256}, {"block": 1024}, {"split": 16}]


def _blocked(x, block):
    x32 = x.astype(np.float32)
    acc = np.zeros(x.shape[:-1], dtype=np.float32)
    for n0 in range(0, x.shape[-1], block):
        acc += np.sum(x32[..., n0:n0 + block], axis=-1, dtype=np.float32)
    return acc


def _split(x, splits, atomic_dtype):
    x32 = x.astype(np.float32)
    acc = np.zeros(x.shape[:-1], dtype=atomic_dtype)
    for idx in np.array_split(np.arange(x.shape[-1]), splits):
        if idx.size == 0:
            continue
        part = np.sum(x32[..., idx[0]:idx[-1] + 1], axis=-1, dtype=np.float32)
        acc = (acc.astype(np.float32) + part).astype(atomic_dtype)
    return acc.astype(np.float32)


def _run(x, config, atomic_dtype):
    config = config or {}
    if "split" in config:
        out = _split(x, int(config["split"]), atomic_dtype)
    elif "block" in config:
        out = _blocked(x, int(config["block"]))
    else:
        out = np.sum(x.astype(np.float32), axis=-1, dtype=np.float32)
    return out.astype(x.dtype)


def baseline(x, config=None):
    return np.zeros(x.shape[:-1], dtype=x.dtype)


def bad(x, config=None):
    return _run(x, config, ml_dtypes.bfloat16)


def good(x, config=None):
    return _run(x, config, np.float32)
