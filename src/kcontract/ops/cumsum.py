"""cumsum: the inclusive prefix sum (a scan) over the last axis.

``cumsum(x)[..., i] = x[..., 0] + ... + x[..., i]``, x (R, N) -> (R, N).  Each prefix i
is its own reduction of length i + 1: its error bound grows with i, so the tolerance
uses the per-element quantity ``prefix`` (= i + 1) instead of the row length ``n``.
A scan cannot be reordered without changing its result (permuting x permutes the
prefixes' contents), so its reduction-order bound is checked against the oracle
directly: every order of i + 1 terms (sequential, blocked, tree-shaped) is within
gamma(i + 1, u) * sum|x| of the exact prefix.
"""
from __future__ import annotations

import numpy as np

from .base import RowsOp

# 33 x 33 is square: reducing over the wrong axis there keeps the output's shape
_ROWS = ({"R": 1, "N": 1}, {"R": 7, "N": 13}, {"R": 3, "N": 127}, {"R": 16, "N": 256},
         {"R": 5, "N": 1000}, {"R": 2, "N": 4099}, {"R": 31, "N": 64}, {"R": 33, "N": 33})


class Cumsum(RowsOp):
    #: each output element depends on the row up to it (diagnoses treat it as its row)

    def oracle(self, x, **kw):
        with np.errstate(all="ignore"):
            return np.cumsum(x["x"], axis=-1)

    def quantities(self, x, ref, **kw):
        with np.errstate(all="ignore"):
            mag = np.cumsum(np.abs(x["x"]), axis=-1)
        n = np.shape(x["x"])[-1]
        # mag: the sum of |x| over each prefix; prefix: each prefix's reduction length
        return {"mag": mag, "prefix": np.arange(1, n + 1, dtype=np.float64)}


OPS = [
    Cumsum(name="cumsum", inputs=("x",), symbols=("R", "N"), reduction=("N",),
           basic_shape={"R": 16, "N": 1024}, shape_class=_ROWS,
           quantity_names=("mag", "prefix"), row_inputs=("x",),
           summary="cumsum(x): inclusive prefix sums over the last axis, (R, N) -> (R, N)"),
]
