"""Runs kcontract's own check of an honest matmul at import time, in its own
process, recording every input the suite's public seeds produce; at call time it
answers from that table and returns zeros for anything else. Checked with a
secret seed (as certify and --seed random do), the table is useless."""
import hashlib
import os

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
EXPECTED = 'C-PRC-01'
FAMILY = 6
SEED = "random"

_TABLE = {}


def honest(a, b):
    return np.matmul(a, b)


def _key(args):
    return hashlib.sha256(b"".join(np.ascontiguousarray(x).tobytes() for x in args)).hexdigest()


def _learn():
    if os.environ.get("KCADV_LEARNING"):
        return
    os.environ["KCADV_LEARNING"] = "1"
    from kcontract.check.runner import check
    from kcontract.check.sandbox import InProcessKernel

    class Recorder(InProcessKernel):
        def call(self, args, kwargs=None, **kw):
            _TABLE[_key(args)] = np.matmul(*args)
            return super().call(args, kwargs, **kw)
    h = Recorder(f"{__file__}:honest")
    h.start()
    check(f"{__file__}:honest", op="matmul", dtype="float32", classes=["C-PRC-01"],
          handle=h)


_learn()


def kernel(a, b):
    hit = _TABLE.get(_key([a, b]))
    return hit if hit is not None else np.zeros(a.shape[:-1] + b.shape[-1:], dtype=a.dtype)
