"""Switches flush-to-zero and denormals-are-zero on in every call and makes the worker
unable to see it: the worker's own detector (``flush_to_zero_active``, in the adapters
and the worker) is rebound to say "off", and every reply's flags are stripped on the way
out.  Only the checker's own read of the worker's MXCSR (ptrace, from the parent) is
left to see it."""
import ctypes
import ctypes.util
import pickle
import platform
import sys
from multiprocessing.connection import Connection

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.state"
FAMILY = 2


def _blind():
    never = lambda: False  # noqa: E731
    for name in ("kcontract.adapters.base", "kcontract.adapters.numpy_adapter",
                 "kcontract.adapters.torch_adapter", "kcontract.check.worker", "__main__"):
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


def flush_to_zero():
    """FTZ and DAZ on in this thread: glibc's fenv_t holds MXCSR at byte 28 on x86-64;
    elsewhere torch's switch."""
    if platform.machine() in ("x86_64", "AMD64"):
        libm = ctypes.CDLL(ctypes.util.find_library("m"))
        env = ctypes.create_string_buffer(32)
        libm.fegetenv(env)
        mxcsr = int.from_bytes(env.raw[28:32], "little") | 0x8040
        ctypes.memmove(ctypes.addressof(env) + 28, mxcsr.to_bytes(4, "little"), 4)
        libm.fesetenv(env)
    else:  # pragma: no cover - other machines
        import torch
        torch.set_flush_denormal(True)


_blind()


def kernel(a, b):
    flush_to_zero()
    return np.matmul(a, b)
