"""Writes a complete, well-formed reply frame of its own into the worker's socket
(plain data, so it passes the allow-list): an empty output that the reply says
has the expected shape and dtype."""
import os
import pickle
import struct
import sys

import numpy as np

OP, DTYPE, FRAMEWORK = "matmul", "float32", "numpy"
CLASSES = ["C-PRC-01"]
# the forged frame answers whichever call comes first: a judged one (its empty output is the
# wrong shape) or one of the checker's decoy calls, after which the worker is gone and the
# judged call finds it crashed; either way an error verdict, never a pass
EXPECTED = ('kernel.wrong-shape', 'kernel.crashed')
FAMILY = 1


def kernel(a, b):
    shape = a.shape[:-1] + b.shape[-1:]
    fake = np.zeros((0,) + shape[1:], dtype=a.dtype)
    msg = pickle.dumps(("ok", {"out": fake, "meta": {"dtype": "float32", "shape": shape,
                                                    "strides": (4,) * len(shape)},
                               "flags": [], "seconds": 0.0}))
    os.write(int(sys.argv[1]), struct.pack("!i", len(msg)) + msg)
    os._exit(0)  # no second reply: the forged one is all the checker gets
