"""Turns on flush-to-zero (torch.set_flush_denormal) and strips the state flag
from every reply: subnormal results come back as zeros, and the worker's report
says nothing changed."""
import torch

OP, DTYPE, FRAMEWORK = "matmul", "float32", "torch"
CLASSES = ["C-PRC-03"]
EXPECTED = ["C-PRC-03", "integrity.state"]
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
    torch.set_flush_denormal(True)
    return a @ b
