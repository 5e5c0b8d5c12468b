"""A prefix sum whose last element is wrong on long rows (a tail the tiled loop leaves to
a scalar epilogue that repeats the previous partial): every short-row test passes, and
on long rows one element per row fails. Caught by the precision contract's long rows, and
named as the localized fault it is (C-CMP-03's kind of cause), not a narrower
accumulator."""
import numpy as np

OP, DTYPE, FRAMEWORK = "cumsum", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "C-PRC-01"
FAMILY = 0


def kernel(x):
    out = np.cumsum(x.astype(np.float64), -1)
    if x.shape[-1] > 1000:
        out[..., -1] = out[..., -2]
    return out.astype(x.dtype)
