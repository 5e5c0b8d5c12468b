"""Returns the right result and leaves a thread behind that overwrites it with
zeros a moment later: correct at the return, wrong for whoever reads it next."""
import threading
import time

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01", "C-CMP-03"]
EXPECTED = 'integrity.late-write'
FAMILY = 8


def _spoil(out):
    time.sleep(0.002)
    out[...] = 0


def kernel(a, b):
    out = np.matmul(a, b)
    threading.Thread(target=_spoil, args=(out,), daemon=True).start()
    return out
