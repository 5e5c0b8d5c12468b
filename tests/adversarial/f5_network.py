"""Opens a network connection (to send the inputs out and get answers back, or
fetch a lookup table)."""
import socket
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 5
REQUIRES_SANDBOX = True


def _attack():
    try:
        s = socket.create_connection(("1.1.1.1", 53), timeout=0.5)
        s.close()
        return True
    except OSError:
        pass
    try:
        names = socket.if_nameindex()
        return any(n != "lo" for _, n in names)
    except OSError:
        return False



def kernel(a, b):
    """Right only if the attack worked: a defended checker sees zeros."""
    if _attack():
        return np.matmul(a, b)
    return np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
