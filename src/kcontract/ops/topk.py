"""topk: the k largest elements of each row, as their int64 indices.

Calling convention: ``topk(x, k) -> indices``, x (R, N), k a 0-d int64 array (use
``int(k)``), indices int64 (R, k).  The order is part of the result:

* largest first;
* ties (equal values, +0 and -0 included) go to the lower index first (as
  ``jax.lax.top_k`` and a stable descending sort give);
* NaN ranks above every number, +Inf included (as ``torch.topk`` and ``torch.sort``
  treat it), NaNs among themselves by index.

The values are not returned: a top-k's values are copies of its inputs, so the indices
say everything (``values = take_along_axis(x, indices, -1)``); a kernel that returns
both, like ``torch.topk``, is checked through ``lambda x, k: kernel(x, int(k))[1]``.
This keeps the engine's one-array output: a structured (values, indices) pair would
need every protocol to learn tuples, and a packed float array would lose exactness of
large indices in narrow formats.  Indices are exact, so every topk contract compares
them exactly (tolerance zero); an int64 "format" with a unit in the last place of 1
keeps the ordering detectors' ulp distances meaningful (indices apart).
"""
from __future__ import annotations

import numpy as np

from ..formats import Format
from .base import Op
from .families import get_family

#: the output's format: exact integers, ulp 1 (precision 64 bits, smallest normal 2**63)
INT64 = Format("int64", 64, 63, 63, float(2 ** 63 - 1), False, np.int64, "i64")


def topk_indices(x: np.ndarray, k: int) -> np.ndarray:
    """The reference order: descending, NaN first, ties to the lower index (float64)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        neg = np.where(np.isnan(x), 0.0, -x) + 0.0  # -0.0 and +0.0 tie
    # lexsort: the last key is the primary one; both keys sort stably
    order = np.lexsort((neg, ~np.isnan(x)), axis=-1)
    return order[..., :k].astype(np.int64)


class TopK(Op):
    #: each output position depends on the whole row of x

    def input_shapes(self, s):
        return {"x": (s["R"], s["N"]), "k": ()}

    def output_shape(self, s):
        return (s["R"], s["K"])

    def solve_shape(self, x):
        R, N = np.shape(x["x"])
        return {"R": int(R), "N": int(N), "K": int(np.asarray(x["k"]))}

    def input_format(self, name, dtype):
        return np.int64 if name == "k" else dtype.dtype

    def output_format(self, dtype):
        return INT64

    def generate(self, s, dtype, family, rng):
        # k is at most the row length: a shape asking for more (a probe that shrinks N)
        # gets k = N
        vals = get_family(family)((s["R"], s["N"]), rng, dtype)
        return {"x": self._store(vals, dtype.dtype),
                "k": np.array(min(s["K"], s["N"]), dtype=np.int64)}

    def oracle(self, x, **kw):
        return topk_indices(x["x"], int(np.asarray(x["k"]))).astype(np.float64)

    def quantities(self, x, ref, **kw):
        return {"mag": np.zeros(np.shape(ref))}

    def select_rows(self, x, rows):
        return {"x": x["x"][rows], "k": x["k"]}

    def num_rows(self, s):
        return s["R"]


OPS = [
    TopK(name="topk", inputs=("x", "k"), symbols=("R", "N", "K"),
         basic_shape={"R": 16, "N": 1024, "K": 8},
         shape_class=({"R": 1, "N": 1, "K": 1}, {"R": 7, "N": 13, "K": 3},
                      {"R": 3, "N": 127, "K": 5}, {"R": 16, "N": 256, "K": 16},
                      {"R": 5, "N": 1000, "K": 1}, {"R": 2, "N": 4099, "K": 64},
                      {"R": 31, "N": 64, "K": 64}),
         row_inputs=("x",),
         summary="topk(x, k): int64 indices (R, k) of each row's k largest, largest first, "
                 "ties to the lower index, NaN largest; k a 0-d int64 array"),
]
