"""Zeroes its first input after use and wraps the worker's Connection.send so that
the reply carries no flags: a checker that trusts the worker's 'mutated-input'
flag never learns of it."""
import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'integrity.mutated-input'
FAMILY = 2


def _strip_flags():
    """Wrap the worker's reply so that no integrity flag ever reaches the checker."""
    import pickle
    from multiprocessing.connection import Connection
    real, real_bytes = Connection.send, Connection.send_bytes

    def clean(obj):
        if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], dict):
            obj[1]["flags"] = []
        return obj

    def send(self, obj):
        return real(self, clean(obj))

    def send_bytes(self, buf, *args):
        return real_bytes(self, pickle.dumps(clean(pickle.loads(buf)), protocol=5))
    Connection.send, Connection.send_bytes = send, send_bytes


_strip_flags()


def kernel(a, b):
    out = np.matmul(a, b)
    a[...] = 0
    return out
