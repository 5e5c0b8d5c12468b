"""embedding: a gather with an out-of-bounds policy."""
from __future__ import annotations

import numpy as np

from .base import Gather, Op
from .families import get_family


def expected_rows(table: np.ndarray, indices: np.ndarray, policy: str) -> np.ndarray:
    """The rows the declared policy prescribes (float64); NaN rows where the
    policy leaves them undefined.  ``raise`` has no rows: callers check for it."""
    V = table.shape[0]
    idx = np.asarray(indices)
    inb = (idx >= 0) & (idx < V)
    if policy == "clamp":
        src = np.clip(idx, 0, V - 1)
        return table[src].astype(np.float64)
    if policy == "wrap":
        return table[np.mod(idx, V)].astype(np.float64)
    out = np.full((idx.shape[0], table.shape[1]), np.nan)
    out[inb] = table[idx[inb]]
    if policy == "zero":
        out[~inb] = 0.0
    return out


class Embedding(Op):
    def input_shapes(self, s):
        return {"table": (s["V"], s["D"]), "indices": (s["N"],)}

    def output_shape(self, s):
        return (s["N"], s["D"])

    def input_format(self, name, dtype):
        return np.int64 if name == "indices" else dtype.dtype

    def generate(self, s, dtype, family, rng):
        table = get_family(family)((s["V"], s["D"]), rng, dtype)
        return {"table": self._store(table, dtype.dtype),
                "indices": rng.integers(0, s["V"], s["N"]).astype(np.int64)}

    def oracle(self, x, **kw):
        return x["table"][x["indices"]].astype(np.float64)

    def select_rows(self, x, rows):
        return {"table": x["table"], "indices": x["indices"][rows]}

    def num_rows(self, s):
        return s["N"]


OPS = [
    Embedding(name="embedding", inputs=("table", "indices"), symbols=("V", "D", "N"),
              basic_shape={"V": 100, "D": 32, "N": 64},
              shape_class=({"V": 1, "D": 1, "N": 1}, {"V": 7, "D": 3, "N": 13}, {"V": 127, "D": 17, "N": 5},
                           {"V": 100, "D": 32, "N": 64}, {"V": 1000, "D": 8, "N": 1000}),
              row_inputs=("indices",), gather=Gather("table", "indices", "N"),
              summary="embedding(table, indices): table (V, D), indices int64 (N,) -> (N, D)"),
]
