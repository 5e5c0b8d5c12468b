"""16-bit matrix times float32 vector with a float32 result, at the memory floor.

numpy has no bfloat16 / float16 matrix-vector product, and torch's CPU one rounds
its result to the operands' format (2^-9 relative for bfloat16: as large as the
rounding noise of the product being checked).  Intel MKL's mixed-precision GEMMs
``cblas_gemm_bf16bf16f32`` and ``cblas_gemm_f16f16f32`` read 16-bit operands and
accumulate and return float32; the x86-64 CPU builds of PyTorch link MKL and export
both.  This module finds them -- in the loaded torch, or in the installed one's
library without importing torch -- and calls them through ctypes on contiguous
rows, so a 16-bit matrix is read once, in its own bytes, by MKL's threads (the
threads torch's own products run on: no second pool spinning beside them).

A vector that the 16-bit format holds exactly (the check's +-1 signs) is one
column; any other float32 vector is split into three 16-bit parts whose sum is
the vector (8 + 8 + 8 significant bits for bfloat16; float16 parts are scaled by
a power of two into its range), three columns of one product.

Where MKL is not there (no torch, another architecture), :func:`matvec` returns
None and the caller widens the matrix chunk by chunk instead.

bfloat16 and float16 matrices go to the compiled helper's own kernel first
(``_fastc.gemv16``: one pass over the matrix with a float32 vector, no splitting, no MKL
needed); this module serves them where the helper could not be built.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import threading
from typing import Optional

import ml_dtypes
import numpy as np

_BF16 = np.dtype(ml_dtypes.bfloat16)
_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_ROW_MAJOR, _NO_TRANS = 101, 111

_lock = threading.Lock()
_FUNCS: Optional[dict] = None  # dtype -> ctypes function, once looked up
_SET_THREADS = None  # MKL_Set_Num_Threads_Local, where exported


def _library_path() -> Optional[str]:
    """libtorch_cpu of the loaded torch, or of the installed one (not imported)."""
    mod = sys.modules.get("torch")
    base = os.path.dirname(mod.__file__) if getattr(mod, "__file__", None) else None
    if base is None:
        try:
            spec = importlib.util.find_spec("torch")
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.origin:
            return None
        base = os.path.dirname(spec.origin)
    path = os.path.join(base, "lib", "libtorch_cpu.so")
    return path if os.path.exists(path) else None


def _load() -> dict:
    global _FUNCS
    with _lock:
        if _FUNCS is not None:
            return _FUNCS
        funcs: dict = {}
        if os.environ.get("KCONTRACT_NO_MKL"):
            _FUNCS = funcs
            return funcs
        path = _library_path()
        try:
            lib = ctypes.CDLL(path) if path else None
        except OSError:
            lib = None
        if lib is not None:
            global _SET_THREADS
            fn = getattr(lib, "MKL_Set_Num_Threads_Local", None)  # the C interface
            if fn is not None:
                fn.restype = ctypes.c_int
                fn.argtypes = [ctypes.c_int]
                _SET_THREADS = fn
            i, p, f = ctypes.c_int, ctypes.c_void_p, ctypes.c_float
            for dt, name in ((_BF16, "cblas_gemm_bf16bf16f32"), (_F16, "cblas_gemm_f16f16f32")):
                fn = getattr(lib, name, None)
                if fn is None:
                    continue
                fn.restype = None
                fn.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
                funcs[dt] = fn
        _FUNCS = funcs
        return funcs


def addresses() -> dict:
    """{'bf16': address of cblas_gemm_bf16bf16f32, 'threads': address of
    MKL_Set_Num_Threads_Local (0 if missing)} for the compiled stage 1, or {}."""
    funcs = _FUNCS if _FUNCS is not None else _load()
    fn = funcs.get(_BF16)
    if fn is None:
        return {}
    t = ctypes.cast(_SET_THREADS, ctypes.c_void_p).value if _SET_THREADS is not None else 0
    return {"bf16": ctypes.cast(fn, ctypes.c_void_p).value, "threads": t or 0}


def available(dtype) -> bool:
    """Whether a 16-bit matrix of ``dtype`` (bfloat16 or float16) has the MKL product."""
    funcs = _FUNCS if _FUNCS is not None else _load()
    return np.dtype(dtype) in funcs


def _rows_ok(X: np.ndarray) -> bool:
    """A 2-D array whose rows are contiguous and aligned for MKL's leading dimension."""
    s0, s1 = X.strides
    it = X.itemsize
    return s1 == it and s0 % it == 0 and s0 >= X.shape[1] * it


_HI = np.uint32(0xFFFF0000)


def columns(v: np.ndarray, dtype) -> tuple[np.ndarray, float]:
    """v (float32, K) as K x m columns of ``dtype`` (m = 1 when exact, else 3) whose
    row sums, divided by the returned scale, are v (to about 2^-24 relative)."""
    if dtype == _BF16:
        u = v.view(np.uint32)
        if not (u & np.uint32(0xFFFF)).any():  # exactly a bfloat16 (the +-1 signs)
            return (u >> 16).astype(np.uint16).view(_BF16)[:, None], 1.0
        # truncation splits exactly: hi keeps the top 8 significant bits, mid the next
        # 8 of the remainder, and lo, what is left, has at most 8
        hi = (u & _HI).view(np.float32)
        r1 = v - hi
        mid = (r1.view(np.uint32) & _HI).view(np.float32)
        lo = r1 - mid
        parts = np.stack((hi, mid, lo), axis=1).view(np.uint32) >> 16
        return parts.astype(np.uint16).view(_BF16), 1.0
    vh = v.astype(np.float16)
    if np.array_equal(vh, v):
        return vh[:, None], 1.0
    m = float(np.max(np.abs(v))) if v.size else 0.0
    if not np.isfinite(m) or m == 0.0:
        return vh[:, None], 1.0
    scale = 2.0 ** (14 - int(np.ceil(np.log2(m))))  # max |v| * scale <= 2^14
    vs = (v.astype(np.float64) * scale).astype(np.float32)
    hi = vs.astype(np.float16)
    r1 = vs - hi.astype(np.float32)
    mid = r1.astype(np.float16)
    lo = (r1 - mid.astype(np.float32)).astype(np.float16)
    return np.stack((hi, mid, lo), axis=1), scale


def matvec(X: np.ndarray, v: np.ndarray, out: Optional[np.ndarray] = None,
           cols: Optional[tuple] = None, single: bool = False) -> Optional[np.ndarray]:
    """X (M, K; bfloat16 or float16, rows contiguous) times v (K, float32) -> (M,) float32,
    or None where MKL is unavailable for X.  ``cols``: :func:`columns` of v, if made.

    ``single``: run on the calling thread only.  For numpy arrays: the product that made
    them ran on numpy's own BLAS threads, which keep spinning for a while after it, and
    MKL's threads started beside them wait for the cores (see the overhead benchmark's
    ``--numpy-mkl-threads``); torch tensors use MKL's threads, which are
    torch's."""
    funcs = _FUNCS if _FUNCS is not None else _load()
    fn = funcs.get(X.dtype)
    if fn is None or X.ndim != 2 or not _rows_ok(X):
        return None
    if single and _SET_THREADS is not None:
        prev = _SET_THREADS(1)
        try:
            return matvec(X, v, out, cols)
        finally:
            _SET_THREADS(prev)
    M, K = X.shape
    V, scale = columns(v, X.dtype) if cols is None else cols
    m = V.shape[1]
    if V.strides[1] != V.itemsize and m > 1:
        V = np.ascontiguousarray(V)
    if m == 1:
        o = out if out is not None else np.empty(M, dtype=np.float32)
    else:
        o = np.empty((M, m), dtype=np.float32)
    if M and K:
        fn(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, M, m, K, 1.0, X.ctypes.data,
           X.strides[0] // X.itemsize, V.ctypes.data, V.strides[0] // V.itemsize, 0.0,
           o.ctypes.data, m)
    elif M:
        o[...] = 0.0
    if m == 1:
        if scale != 1.0:
            o /= np.float32(scale)
        return o
    z = o.sum(axis=1, dtype=np.float32) if scale == 1.0 else \
        (o.sum(axis=1, dtype=np.float64) / scale).astype(np.float32)
    if out is not None:
        out[...] = z
        return out
    return z
