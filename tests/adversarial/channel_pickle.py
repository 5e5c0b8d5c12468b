"""Writes its own message into the worker's channel to the checker: a pickle
whose loading would run code in the checker's process (here, harmlessly, set an
environment variable there). A checker that unpickles replies naively runs it."""
import os
import pickle
import struct
import sys

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = "integrity.transport"
FAMILY = 0


class _Payload:
    def __reduce__(self):
        return (exec, ("import os; os.environ['KCONTRACT_ADVERSARIAL_PWNED'] = '1'",))


def kernel(a, b):
    fd = int(sys.argv[1])
    out = np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
    msg = pickle.dumps(("ok", {"out": out, "meta": {}, "flags": [], "seconds": 0.0,
                               "x": _Payload()}))
    os.write(fd, struct.pack("!i", len(msg)) + msg)
    return out
