"""A plain float32 NCHW convolution for the conv2d calibration kernels (im2col and one
matrix product), with an optional rounding of the operands first."""
import numpy as np


def conv2d(x, w, stride, padding, *, channels=None, operands=None):
    """``channels``: only the first that many input channels (a kernel that drops the
    rest); ``operands``: a function rounding x and w before the products."""
    s, p = int(stride), int(padding)
    xf, wf = x.astype(np.float32), w.astype(np.float32)
    if operands is not None:
        xf, wf = operands(xf), operands(wf)
    if channels is not None:
        xf, wf = xf[:, :channels], wf[:, :channels]
    O, C, KH, KW = wf.shape
    xp = np.pad(xf, ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (KH, KW), axis=(2, 3))[:, :, ::s, ::s]
    N, _, OH, OW = win.shape[:4]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(N * OH * OW, C * KH * KW)
    out = cols @ wf.reshape(O, C * KH * KW).T
    return out.reshape(N, OH, OW, O).transpose(0, 3, 1, 2).astype(x.dtype)
