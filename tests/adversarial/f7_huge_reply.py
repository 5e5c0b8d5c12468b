"""Returns a 320 MiB output for a small matmul: a checker that accepts any reply
holds it (and its copies) in memory."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'integrity.transport'
FAMILY = 7


def kernel(a, b):
    return np.ones(80 << 20, dtype=np.float32)
