"""Switches flush-to-zero on in every call and makes the worker unable to see it: the
worker's own detector (``flush_to_zero_active``, in the adapters and the worker) is
rebound to say "off", the state snapshot it compares is rebuilt, and every reply's flags
are stripped on the way out.  Only the checker's own read of the worker's MXCSR (ptrace,
from the parent) is left to see it."""
import pickle
import sys
from multiprocessing.connection import Connection

import torch

OP, DTYPE, FRAMEWORK = "matmul", "float32", "torch"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.state"
FAMILY = 2


def _blind():
    never = lambda: False  # noqa: E731
    for name in ("kcontract.adapters.base", "kcontract.adapters.torch_adapter",
                 "kcontract.check.worker", "__main__"):
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, "flush_to_zero_active"):
            mod.flush_to_zero_active = never
    real, real_bytes = Connection.send, Connection.send_bytes

    def clean(obj):
        if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], dict):
            obj[1]["flags"] = []
        return obj

    Connection.send = lambda self, obj: real(self, clean(obj))
    Connection.send_bytes = lambda self, buf, *a: real_bytes(
        self, pickle.dumps(clean(pickle.loads(buf)), protocol=5))


_blind()


def kernel(a, b):
    torch.set_flush_denormal(True)
    return a @ b
