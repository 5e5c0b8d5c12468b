"""Opens the results store the checker will record this run in and marks every
earlier run of this kernel conformant (or, failing that, creates a table)."""
import os
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 3
REQUIRES_SANDBOX = True


def _attack():
    import sqlite3
    path = os.environ.get("KCONTRACT_STORE", "")
    if not path:
        return False
    try:
        with sqlite3.connect(path, timeout=1) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS kcadv_planted (x)")
        return True
    except sqlite3.Error:
        return False



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
