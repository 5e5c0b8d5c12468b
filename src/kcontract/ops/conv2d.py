"""conv2d: 2-D convolution (cross-correlation, as in deep learning), NCHW.

``conv2d(x, w, stride, padding) -> out``: x (N, C, H, W), w (O, C, KH, KW), stride and
padding 0-d int64 arrays (use ``int()``; the same in both spatial directions; zero
padding), out (N, O, OH, OW) with OH = (H + 2 padding - KH) // stride + 1 (OW alike):

    out[n, o, i, j] = sum_{c, p, q} xpad[n, c, i*stride + p, j*stride + q] * w[o, c, p, q]

Stride and padding travel as inputs, not keyword arguments, so that they belong to each
shape of a sweep (symbols S and P) and the output shape follows from the inputs alone.
The reduction is over C * KH * KW terms.  A shape whose kernel is larger than the
padded input gets the kernel clipped to it (KH <= H + 2P), stride at least 1.
"""
from __future__ import annotations

import numpy as np

from .base import Op
from .families import get_family


def out_size(n: int, k: int, stride: int, pad: int) -> int:
    return (n + 2 * pad - k) // stride + 1


def _geometry(s) -> dict:
    g = dict(s)
    g["S"] = max(1, int(g.get("S", 1)))
    g["P"] = max(0, int(g.get("P", 0)))
    g["KH"] = max(1, min(int(g["KH"]), g["H"] + 2 * g["P"]))
    g["KW"] = max(1, min(int(g["KW"]), g["W"] + 2 * g["P"]))
    return g


def correlate(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """The float64 cross-correlation through a view of every window."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    KH, KW = w.shape[-2:]
    win = np.lib.stride_tricks.sliding_window_view(xp, (KH, KW), axis=(2, 3))
    win = win[:, :, ::stride, ::stride]
    N, C, OH, OW = win.shape[:4]
    # im2col: one (N*OH*OW, C*KH*KW) @ (C*KH*KW, O) product in float64
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(N * OH * OW, C * KH * KW)
    with np.errstate(all="ignore"):
        out = cols @ w.reshape(w.shape[0], -1).T
    return out.reshape(N, OH, OW, w.shape[0]).transpose(0, 3, 1, 2)


class Conv2d(Op):
    def input_shapes(self, s):
        g = _geometry(s)
        return {"x": (g["N"], g["C"], g["H"], g["W"]), "w": (g["O"], g["C"], g["KH"], g["KW"]),
                "stride": (), "padding": ()}

    def output_shape(self, s):
        g = _geometry(s)
        return (g["N"], g["O"], out_size(g["H"], g["KH"], g["S"], g["P"]),
                out_size(g["W"], g["KW"], g["S"], g["P"]))

    def solve_shape(self, x):
        N, C, H, W = np.shape(x["x"])
        O, _, KH, KW = np.shape(x["w"])
        return {"N": N, "C": C, "H": H, "W": W, "O": O, "KH": KH, "KW": KW,
                "S": int(np.asarray(x["stride"])), "P": int(np.asarray(x["padding"]))}

    def input_format(self, name, dtype):
        return np.int64 if name in ("stride", "padding") else dtype.dtype

    def reduction_length(self, s):
        g = _geometry(s)
        return g["C"] * g["KH"] * g["KW"]

    def generate(self, s, dtype, family, rng):
        g = _geometry(s)
        shp = self.input_shapes(g)
        fam = get_family(family)
        return {"x": self._store(fam(shp["x"], rng, dtype), dtype.dtype),
                "w": self._store(fam(shp["w"], rng, dtype), dtype.dtype),
                "stride": np.array(g["S"], dtype=np.int64),
                "padding": np.array(g["P"], dtype=np.int64)}

    def _args(self, x):
        return int(np.asarray(x["stride"])), int(np.asarray(x["padding"]))

    def oracle(self, x, **kw):
        return correlate(x["x"], x["w"], *self._args(x))

    def quantities(self, x, ref, **kw):
        return {"mag": correlate(np.abs(x["x"]), np.abs(x["w"]), *self._args(x))}

    def select_rows(self, x, rows):
        return {"x": x["x"][rows], "w": x["w"], "stride": x["stride"], "padding": x["padding"]}

    def num_rows(self, s):
        return s["N"]


OPS = [
    Conv2d(name="conv2d", inputs=("x", "w", "stride", "padding"),
           symbols=("N", "C", "H", "W", "O", "KH", "KW", "S", "P"),
           reduction=("C", "KH", "KW"),
           basic_shape={"N": 2, "C": 16, "H": 16, "W": 16, "O": 8, "KH": 3, "KW": 3, "S": 1,
                        "P": 1},
           shape_class=({"N": 1, "C": 1, "H": 1, "W": 1, "O": 1, "KH": 1, "KW": 1, "S": 1, "P": 0},
                        {"N": 1, "C": 3, "H": 7, "W": 5, "O": 2, "KH": 3, "KW": 3, "S": 2, "P": 1},
                        {"N": 2, "C": 5, "H": 9, "W": 11, "O": 3, "KH": 2, "KW": 4, "S": 1, "P": 0},
                        {"N": 1, "C": 8, "H": 13, "W": 13, "O": 4, "KH": 5, "KW": 5, "S": 3, "P": 2},
                        {"N": 3, "C": 2, "H": 8, "W": 8, "O": 6, "KH": 1, "KW": 1, "S": 2, "P": 0},
                        {"N": 1, "C": 32, "H": 6, "W": 6, "O": 4, "KH": 3, "KW": 3, "S": 1, "P": 1}),
           row_inputs=("x",),
           summary="conv2d(x, w, stride, padding): x (N, C, H, W), w (O, C, KH, KW), NCHW "
                   "cross-correlation, zero padding; stride, padding 0-d int64 arrays"),
]
