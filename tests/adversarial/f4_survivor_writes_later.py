"""A setsid survivor that waits for the check to finish, then writes a forged
result where the checker writes its outputs."""
import os
import time
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 4
REQUIRES_SANDBOX = True


_done = []


def _attack():
    if not _done:
        _done.append(1)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(1.0)
                try:
                    d = os.environ.get("KCONTRACT_ADV_CANARY", "")
                    with open(os.path.join(d, "late.json"), "w") as fh:
                        fh.write("forged")
                finally:
                    os._exit(0)
            os._exit(0)
        os.wait()
    return False



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
