"""silu_mul: SwiGLU's elementwise part, ``silu(gate) * up``.

``silu_mul(gate, up) = gate * sigmoid(gate) * up`` elementwise, gate and up (R, N) (the
two halves of the gated MLP's up-projection).  The float64 oracle evaluates that
formula as IEEE 754 says: at gate = -Inf it is -Inf * 0 = NaN, at gate = +Inf it is
+Inf * up.
"""
from __future__ import annotations

import numpy as np

from .base import RowsOp

_ELEM = ({"R": 1, "N": 1}, {"R": 7, "N": 13}, {"R": 3, "N": 127}, {"R": 16, "N": 256},
         {"R": 5, "N": 1000}, {"R": 64, "N": 33})


def silu(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return x * (1.0 / (1.0 + np.exp(-x)))


class SiluMul(RowsOp):
    def input_shapes(self, s):
        return {"gate": (s["R"], s["N"]), "up": (s["R"], s["N"])}

    def oracle(self, x, **kw):
        with np.errstate(all="ignore"):
            return silu(x["gate"]) * x["up"]

    def quantities(self, x, ref, **kw):
        # no cancellation anywhere (1 + exp(-g) >= 1): every rounding is relative to |out|
        return {"mag": np.abs(ref)}

    def select_rows(self, x, rows):
        return {"gate": x["gate"][rows], "up": x["up"][rows]}


OPS = [
    SiluMul(name="silu_mul", inputs=("gate", "up"), symbols=("R", "N"),
            basic_shape={"R": 16, "N": 1024}, shape_class=_ELEM, row_inputs=("gate", "up"),
            summary="silu_mul(gate, up) = gate * sigmoid(gate) * up, elementwise (SwiGLU)"),
]
