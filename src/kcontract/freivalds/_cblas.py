"""The CBLAS matrix-vector products numpy itself calls, by address.

The compiled stage 1 (``_fastc.stage1``) runs the check's three float32 / float64
matrix-vector products through the same BLAS function numpy's ``X @ v`` calls, with the
arguments numpy passes it (row-major, no transpose, unit strides), so its projections
are numpy's bit for bit -- and the products run on numpy's own BLAS threads, the ones its
matrix products just used.  The library is numpy's bundled one, found among the loaded
libraries (numpy's wheels bundle OpenBLAS with a 64-bit integer interface and suffixed
symbols); where it is not found (numpy built against a system BLAS) the check calls numpy.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Optional

_lock = threading.Lock()
_FOUND: Optional[dict] = None

#: (symbol suffix, 64-bit integers): numpy's bundled OpenBLAS first, then plain CBLAS.
_NAMES = (("scipy_cblas_{}64_", True), ("cblas_{}64_", True), ("scipy_cblas_{}", False),
          ("cblas_{}", False))


def _loaded_libraries() -> set:
    """The paths of the shared libraries loaded in this process (empty where
    /proc/self/maps cannot be read)."""
    try:
        with open("/proc/self/maps") as fh:
            return {ln.split()[-1] for ln in fh if ".so" in ln}
    except OSError:
        return set()


def _numpy_blas_paths() -> list:
    import numpy as np  # noqa: F401  (its BLAS is loaded with it)

    # numpy's own bundled library only: another BLAS loaded beside it (scipy's, MKL) would
    # sum in another order than numpy's `X @ v`
    return sorted(p for p in _loaded_libraries() if "blas" in p.lower() and "numpy" in p.lower())


def _register_first(paths, symbols, register) -> bool:
    """``register(*addresses)`` with the first library among ``paths`` that exports every
    one of ``symbols`` (each a name, or a tuple of names tried in order); whether one was
    registered (``register`` returning true)."""
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        found = []
        for names in symbols:
            f = next((getattr(lib, n) for n in ((names,) if isinstance(names, str) else names)
                      if hasattr(lib, n)), None)
            if f is None:
                break
            found.append(ctypes.cast(f, ctypes.c_void_p).value)
        else:
            if register(*found):
                return True
    return False


_MKL: Optional[dict] = None


def mkl_gemv() -> dict:
    """{'float32': address, 'float64': address, 'ilp64': 2} of MKL's Fortran sgemv_ /
    dgemv_ in the CPU torch library (torch.mv's BLAS, on torch's threads), or {}."""
    global _MKL
    if _MKL is not None:
        return _MKL
    from . import _mkl

    found: dict = {}
    with _lock:
        path = _mkl._library_path()
        try:
            lib = ctypes.CDLL(path) if path else None
        except OSError:
            lib = None
        s = getattr(lib, "sgemv_", None) if lib is not None else None
        d = getattr(lib, "dgemv_", None) if lib is not None else None
        if s is not None and d is not None and _mkl.available(_mkl._BF16):
            # MKL's mixed-precision GEMM is there too: the library is MKL, 32-bit integers
            found = {"float32": ctypes.cast(s, ctypes.c_void_p).value,
                     "float64": ctypes.cast(d, ctypes.c_void_p).value, "ilp64": 2}
        _MKL = found
    return found


def gemv() -> dict:
    """{'float32': address, 'float64': address, 'ilp64': bool} or {} where not found."""
    global _FOUND
    if _FOUND is not None:
        return _FOUND
    with _lock:
        if _FOUND is not None:
            return _FOUND
        found: dict = {}
        for path in _numpy_blas_paths():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for pattern, ilp64 in _NAMES:
                s = getattr(lib, pattern.format("sgemv"), None)
                d = getattr(lib, pattern.format("dgemv"), None)
                if s is not None and d is not None:
                    found = {"float32": ctypes.cast(s, ctypes.c_void_p).value,
                             "float64": ctypes.cast(d, ctypes.c_void_p).value,
                             "ilp64": int(ilp64)}
                    break
            if found:
                break
        _FOUND = found
        return found


def for_arrays(numpy_arrays: bool) -> dict:
    """The gemv a back end's own products call: numpy's (:func:`gemv`) for numpy arrays,
    MKL's (:func:`mkl_gemv`, what torch.mv calls) for CPU tensors."""
    return gemv() if numpy_arrays else mkl_gemv()


_POOL: Optional[bool] = None
#: the OpenMP runtimes a framework may load (GNU's; LLVM's and Intel's export its entry points)
_OMP_NAMES = ("libgomp", "libiomp5", "libomp")


def _loaded_omp_paths() -> list:
    """The OpenMP runtimes loaded in this process, torch's own first."""
    found = [p for p in _loaded_libraries() if p.rsplit("/", 1)[-1].startswith(_OMP_NAMES)]
    return sorted(found, key=lambda p: ("torch" not in p.lower(), p))


def torch_pool() -> bool:
    """Register torch's OpenMP threads with the compiled helper (``_fastc.set_pool``), so
    that its own products (16-bit, few-row float32) for CPU tensors run on the threads
    torch's own products ran on (awake right after them) rather than on the calling thread
    alone: one core draws only part of the memory's bandwidth.  True where registered;
    False without torch loaded, the helper, or an OpenMP runtime in the process (the
    products then run on the calling thread, with the same results)."""
    global _POOL
    if _POOL is not None:
        return _POOL
    from ._screen import _fastc

    with _lock:
        _POOL = _fastc is not None and "torch" in __import__("sys").modules \
            and _register_first(_loaded_omp_paths(), ("GOMP_parallel", "omp_get_thread_num",
                                                      "omp_get_num_threads"), _fastc.set_pool)
    return _POOL


_BLAS_POOL: Optional[bool] = None
#: numpy's bundled OpenBLAS's thread count, then plain OpenBLAS's
_THREADS_NAMES = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                  "scipy_openblas_get_num_threads", "openblas_get_num_threads")


def blas_pool() -> bool:
    """Register numpy's OpenBLAS threads with the compiled helper (``_fastc.set_blas_pool``),
    so that its own products (16-bit, few-row float32) of numpy arrays run on the threads
    numpy's own products ran on.  After a product OpenBLAS's threads spin for a while
    before they sleep, and a thread of our own beside them gets the second core late or not
    at all (measured: one thread did 15 of 16 blocks of rows); OpenBLAS's
    ``gotoblas_pthread`` hands a function to its own threads, the calling thread taking the
    first share.  True where registered; False without the helper or where numpy's BLAS is
    not an OpenBLAS with its own thread server (the products then run on the calling
    thread, with the same results: each row's sum does not depend on the thread that makes
    it)."""
    global _BLAS_POOL
    if _BLAS_POOL is not None:
        return _BLAS_POOL
    from ._screen import _fastc

    with _lock:
        _BLAS_POOL = _fastc is not None and _register_first(
            _numpy_blas_paths(), ("gotoblas_pthread", _THREADS_NAMES), _fastc.set_blas_pool)
    return _BLAS_POOL


def pool_for(numpy_arrays: bool) -> int:
    """The threads the helper's own products (16-bit, few-row float32) run on: 2 numpy's
    OpenBLAS threads (for numpy arrays, see :func:`blas_pool`), 1 torch's OpenMP threads
    (for CPU tensors, see :func:`torch_pool`), 0 the calling thread alone."""
    if numpy_arrays:
        return 2 if blas_pool() else 0
    return 1 if torch_pool() else 0
