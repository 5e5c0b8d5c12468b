"""Writes into the folder where the checker writes the run's JSON and reports
(a forged 'conformant' JSON before the checker writes its own)."""
import os
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 3
REQUIRES_SANDBOX = True


def _attack():
    d = os.environ.get("KCONTRACT_ADV_CANARY", "")
    try:
        with open(os.path.join(d, "run.json"), "w") as fh:
            fh.write('{"verdict": "conformant"}')
        return True
    except OSError:
        return False



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
