"""Right rows for in-range indices; for the out-of-range probes, an object array of
Python integers too large for a float (10**400): it passes the allow-listed reply, and
turning it into numbers to classify the rows raises (OverflowError) in the checker.
The checker's failure to judge it is the kernel's verdict, not a checker bug."""
import numpy as np

OP, DTYPE, FRAMEWORK = "embedding", "float32", "numpy"
CLASSES = ["C-EXC-02"]
EXPECTED = "kernel.unjudgeable-output"
FAMILY = 1
DECLARE = {"oob": "clamp"}


def kernel(table, indices):
    idx = np.asarray(indices)
    if ((idx < 0) | (idx >= table.shape[0])).any():
        out = np.empty((idx.shape[0], table.shape[1]), dtype=object)
        out[...] = 10 ** 400
        return out
    return table[idx]
