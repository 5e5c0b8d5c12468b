"""float16 arithmetic only when an operand reaches 8 in magnitude (a kernel with a
"fast path" for inputs it thinks are safe): every normal-range test passes; inputs with
large magnitudes overflow at 65504 and come back as Inf. Caught by the exceptional-values
contract, and named as what it is: operands in float16 (C-PRC-04's cause), the Inf
exactly where the float16 emulation of the product overflows."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = None
EXPECTED = "C-EXC-01"
FAMILY = 0


def kernel(a, b):
    if max(float(np.abs(a).max()), float(np.abs(b).max())) >= 8:
        return (a.astype(np.float16) @ b.astype(np.float16)).astype(a.dtype)
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(a.dtype)
