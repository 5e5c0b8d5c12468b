"""Array back ends for the Freivalds check.

:class:`NumpyOps` always works; :class:`TorchOps` is used for torch tensors and
imports torch only when such a tensor is seen (``kcontract.freivalds`` never
imports torch at module import time).  Both expose the same small set of
operations; every O(n) result is handed back as a host float64 numpy array.

Operands in float16 / bfloat16 / float8 are widened to float32 chunk by chunk
(a chunk stays in cache), so the check runs in higher precision than the
operands without materialising a widened copy of a whole matrix.
"""
from __future__ import annotations

import contextlib
import math
import sys
import threading
from typing import Any, Iterable

import ml_dtypes
import numpy as np

from . import _cblas, _mkl

try:
    from . import _fastc
except ImportError:  # pragma: no cover - where the helper module could not be built
    _fastc = None

#: Elements per widened chunk (1 MiB of float32).
CHUNK_ELEMS = 1 << 18
#: Elements per widened chunk on an accelerator (fewer, larger kernels).
DEVICE_CHUNK_ELEMS = 1 << 24
#: Elements per float64 chunk of B in the stage-2 recomputation (8 MiB).
EXACT_CHUNK_ELEMS = 1 << 20

NUMPY_FORMATS = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
_NP_NAMES = {v: k for k, v in NUMPY_FORMATS.items()}


def is_torch_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def ops_for(*arrays):
    """The back end for the given arrays (all numpy or all torch on one device)."""
    if all(type(a) is np.ndarray for a in arrays):
        return NUMPY_OPS
    torch = sys.modules.get("torch")
    if torch is not None and all(isinstance(a, torch.Tensor) for a in arrays):
        dev = arrays[0].device
        ops = _TORCH_OPS.get(dev)
        if ops is None:
            ops = _TORCH_OPS[dev] = TorchOps(dev)
        return ops
    kinds = {is_torch_tensor(a) for a in arrays}
    if len(kinds) != 1:
        return None
    if kinds.pop():
        dev = arrays[0].device
        ops = _TORCH_OPS.get(dev)
        if ops is None:
            ops = _TORCH_OPS[dev] = TorchOps(dev)
        return ops
    return NUMPY_OPS


#: One TorchOps per device (its construction reads torch's dtype table).
_TORCH_OPS: dict = {}


def sub_index(idx: tuple, shape: tuple) -> tuple:
    """The index into an operand with batch ``shape`` that numpy broadcasting
    pairs with the full batch index ``idx`` (shapes right-aligned, size-1 dims
    broadcast)."""
    off = len(idx) - len(shape)
    return tuple(0 if n == 1 else idx[off + k] for k, n in enumerate(shape))


def _chunks(n: int, step: int) -> Iterable[tuple[int, int]]:
    step = max(1, step)
    for s in range(0, n, step):
        yield s, min(n, s + step)


_BF16 = np.dtype(ml_dtypes.bfloat16)


_BUFFERS = threading.local()


def scratch(key, make):
    """A per-thread scratch buffer for ``key``, made by ``make()`` on first use
    (widening buffers are reused across calls instead of allocated per call)."""
    d = getattr(_BUFFERS, "d", None)
    if d is None:
        d = _BUFFERS.d = {}
    buf = d.get(key)
    if buf is None:
        if len(d) >= 16:
            d.clear()
        buf = d[key] = make()
    return buf


def aligned_empty(shape, dtype, align: int = 64) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``align``-byte boundary
    (MKL's gemv rounds its result differently with its vectors' alignment: the check's
    vectors are aligned alike in every path, so that the paths decide alike)."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    raw = np.empty(n * dt.itemsize + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + n * dt.itemsize].view(dt).reshape(shape)


class _Widener:
    """Widens row chunks of a narrow-format matrix to the check's dtype.

    bfloat16 to float32 is exact and costs one integer copy and shift in a
    reused buffer (a bfloat16 is the upper half of a float32); other formats
    use numpy's (ml_dtypes') conversion."""

    def __init__(self, src_dtype, cdtype, rows: int, cols: int):
        self.shift = np.dtype(src_dtype) == _BF16 and np.dtype(cdtype) == np.float32
        self.cdtype = cdtype
        if self.shift:
            self.buf = scratch(("widen", rows, cols),
                               lambda: np.empty((rows, cols), dtype=np.uint32))

    def __call__(self, chunk):
        if not self.shift:
            return chunk.astype(self.cdtype)
        b = self.buf[:chunk.shape[0]]
        b[...] = chunk.view(np.uint16)
        b <<= 16
        return b.view(np.float32)


def _half_matvec(X, v, out, full, torch_threads: bool = False) -> bool:
    """out[idx] = X[idx] v[idx] for bfloat16 or float16 matrices whose rows are contiguous,
    by the compiled kernel (``_fastc.gemv16``: float32 accumulation, on numpy's OpenBLAS
    threads, or with ``torch_threads`` on torch's OpenMP threads: see
    ``_cblas.pool_for``); False (out partly written) where a matrix's layout does not
    allow it."""
    f16 = X.dtype == np.float16
    pool = _cblas.pool_for(not torch_threads)
    for idx in np.ndindex(*full):
        xi = X[sub_index(idx, X.shape[:-2])]
        vi = v if v.ndim == 1 else v[sub_index(idx, v.shape[:-1])]
        if xi.shape[-1] > 1 and xi.strides[-1] != 2 or xi.strides[0] < 0:
            return False
        try:
            _fastc.gemv16(xi.view(np.uint16), np.ascontiguousarray(vi, dtype=np.float32),
                          out[idx], -1, f16, pool)
        except ValueError:
            return False
    return True


class NumpyOps:
    name = "numpy"
    device = "cpu"

    # -- facts ---------------------------------------------------------------
    @staticmethod
    def format_name(x) -> str | None:
        return _NP_NAMES.get(x.dtype)

    @staticmethod
    def dtype_str(x) -> str:
        return str(np.dtype(x.dtype))

    @staticmethod
    def shape(x) -> tuple:
        return tuple(x.shape)

    @staticmethod
    def compute_dtype(fmt_name: str):
        return np.float64 if fmt_name == "float64" else np.float32

    # -- O(n) helpers ----------------------------------------------------------
    @staticmethod
    def host_dtype(cdtype):
        """The numpy dtype of host vectors for the check's ``cdtype``."""
        return np.dtype(cdtype)

    def from_host(self, v: np.ndarray, dtype):
        return np.ascontiguousarray(v, dtype=dtype)

    @staticmethod
    def to_host(x) -> np.ndarray:
        """An O(n) result as a host numpy array (float32 or float64, not copied)."""
        return x

    @staticmethod
    def to_host64(x) -> np.ndarray:
        return np.asarray(x, dtype=np.float64)

    @staticmethod
    def host_view(X):
        """X as a numpy array without a copy (None where that is impossible)."""
        return X

    @staticmethod
    def sync() -> None:
        return None

    def exact_mode(self):
        return contextlib.nullcontext()

    # -- passes over a matrix ----------------------------------------------------
    def matvec(self, X, v, cdtype, own_threads: bool = False):
        """X (..., M, K) times v (K,) or (..., K) -> (..., M) in ``cdtype``.
        ``v`` is already in ``cdtype``; 16-bit X is read by the helper's kernel, or where
        it is missing MKL's mixed-precision product (on the calling thread only, unless
        ``own_threads``: the views of torch tensors, whose threads are torch's), other
        formats are widened chunk by chunk."""
        if X.dtype == cdtype:
            if X.ndim == 2 and v.ndim == 1:
                return X @ v
            return np.matmul(X, v[..., None])[..., 0]
        M, K = X.shape[-2:]
        full = np.broadcast_shapes(X.shape[:-2], v.shape[:-1])
        out = np.empty(full + (M,), dtype=cdtype)
        if (X.dtype == _BF16 or X.dtype == np.float16) and np.dtype(cdtype) == np.float32 \
                and _fastc is not None:
            # 16-bit: the helper's kernel reads the matrix once in its own bytes
            if _half_matvec(X, v, out, full, own_threads):
                return out
        if np.dtype(cdtype) == np.float32 and _mkl.available(X.dtype):
            # 16-bit operands: MKL's mixed-precision product reads them in their own
            # bytes (see _mkl); matrices it cannot take are widened below
            cols = _mkl.columns(v, X.dtype) if v.ndim == 1 else None
            done = True
            for idx in np.ndindex(*full):
                xi = X[sub_index(idx, X.shape[:-2])]
                vi = v if v.ndim == 1 else v[sub_index(idx, v.shape[:-1])]
                if _mkl.matvec(xi, vi, out=out[idx], cols=cols,
                               single=not own_threads) is None:
                    done = False
                    break
            if done:
                return out
        rows = max(1, CHUNK_ELEMS // max(K, 1))
        widen = _Widener(X.dtype, cdtype, min(rows, M), K)
        for idx in np.ndindex(*full):
            xi = X[sub_index(idx, X.shape[:-2])]
            vi = v[sub_index(idx, v.shape[:-1])]
            o = out[idx]
            for s, e in _chunks(M, rows):
                np.dot(widen(xi[s:e]), vi, out=o[s:e])
        return out

    def matmat(self, X, V, cdtype):
        """X (..., M, K) times V (K, G) or (..., K, G) -> (..., M, G) in ``cdtype``."""
        if X.dtype == cdtype:
            return np.matmul(X, V)
        M, K = X.shape[-2:]
        full = np.broadcast_shapes(X.shape[:-2], V.shape[:-2])
        out = np.empty(full + (M, V.shape[-1]), dtype=cdtype)
        rows = max(1, CHUNK_ELEMS // max(K, 1))
        for idx in np.ndindex(*full):
            xi = X[sub_index(idx, X.shape[:-2])]
            vi = V[sub_index(idx, V.shape[:-2])]
            o = out[idx]
            for s, e in _chunks(M, rows):
                np.matmul(xi[s:e].astype(cdtype), vi, out=o[s:e])
        return out

    def vecmat(self, s, X, cdtype):
        """s (M,) times X (..., M, N) -> (..., N)."""
        if X.dtype == cdtype:
            return np.matmul(s, X)
        batch = X.shape[:-2]
        M, N = X.shape[-2:]
        out = np.zeros(batch + (N,), dtype=cdtype)
        rows = max(1, CHUNK_ELEMS // max(N, 1))
        for idx in np.ndindex(*batch):
            xi = X[idx]
            o = out[idx]
            for a, b in _chunks(M, rows):
                o += s[a:b] @ xi[a:b].astype(cdtype)
        return out

    @staticmethod
    def row_sq(X, rows) -> np.ndarray:
        """Squared Euclidean norms of rows ``rows`` (None: all) of every matrix
        of X: (batch..., r), float32 or float64 (float64 where float32 overflows)."""
        sub = X if rows is None else X[rows] if X.ndim == 2 else X[..., rows, :]
        if sub.dtype != np.float32 and sub.dtype != np.float64:
            sub = sub.astype(np.float32)
        with np.errstate(over="ignore"):  # (float32 overflow: redone in float64 below)
            sq = np.vecdot(sub, sub)
        if sq.dtype == np.float32 and not math.isfinite(float(sq.max(initial=0.0))):
            sub = sub.astype(np.float64)
            sq = np.vecdot(sub, sub)
        return sq

    @staticmethod
    def row_weighted_sq(X, w) -> np.ndarray:
        """sum_k x_ik^2 w_k for every row of a 2-D X, float64 (M,); row chunks in
        float32 (float64 for float64 X)."""
        wt = np.dtype(np.float64 if X.dtype == np.float64 else np.float32)
        w = np.asarray(w, dtype=wt)
        M, K = X.shape
        out = np.empty(M, dtype=np.float64)
        rows = max(1, CHUNK_ELEMS // max(K, 1))
        with np.errstate(over="ignore", invalid="ignore"):
            for s, e in _chunks(M, rows):
                x = X[s:e].astype(wt)
                out[s:e] = np.square(x, out=x) @ w
        return out

    def row_norms(self, X, rows) -> np.ndarray:
        """Euclidean norms of rows ``rows`` (None: all) of every matrix of X: (batch..., r)."""
        return np.sqrt(self.row_sq(X, rows).astype(np.float64))

    @staticmethod
    def col_norms(X, cols) -> np.ndarray:
        """Euclidean norms of columns ``cols`` of every matrix of X: (batch..., c)."""
        sub = X[..., :, cols].astype(np.float64)
        return np.sqrt(np.einsum("...ij,...ij->...j", sub, sub))

    @staticmethod
    def rows_contiguous(X) -> bool:
        return X.strides[-1] == X.itemsize

    # -- diagnosis (slow path) -----------------------------------------------------
    @staticmethod
    def all_finite(X) -> bool:
        if X.size == 0:
            return True
        if X.dtype in (np.float64, np.float32, np.float16):
            return bool(np.isfinite(X).all())
        rows = max(1, CHUNK_ELEMS // max(X.shape[-1], 1))
        flat = X.reshape(-1, X.shape[-1])
        return all(bool(np.isfinite(flat[s:e].astype(np.float32)).all())
                   for s, e in _chunks(flat.shape[0], rows))

    @staticmethod
    def nonfinite_positions(X, limit: int = 10) -> list[tuple]:
        bad = ~np.isfinite(np.asarray(X, dtype=np.float64) if X.dtype not in
                           (np.float64, np.float32, np.float16) else X)
        pos = np.argwhere(bad)[:limit]
        return [tuple(int(v) for v in p) for p in pos]

    @staticmethod
    def take(X, index: tuple) -> np.ndarray:
        """X[index] (a row or element) as host float64."""
        return np.asarray(X[index], dtype=np.float64)

    def exact_rows(self, A, B, pairs):
        """Float64 recomputation of rows.  ``pairs``: list of (a_index, b_index, i)
        where a_index / b_index index the batch dimensions of A / B.  Returns
        (cstar, abssum) of shape (R, N): sum_k a_ik b_kj and sum_k |a_ik b_kj|."""
        N = B.shape[-1]
        K = B.shape[-2]
        R = len(pairs)
        cstar = np.zeros((R, N))
        abssum = np.zeros((R, N))
        groups: dict[tuple, list[int]] = {}
        for r, (ai, bi, i) in enumerate(pairs):
            groups.setdefault(bi, []).append(r)
        kc = max(1, EXACT_CHUNK_ELEMS // max(N, 1))
        for bi, rs in groups.items():
            Bi = B[bi]
            Ar = np.stack([np.asarray(A[pairs[r][0]][pairs[r][2]], dtype=np.float64) for r in rs])
            Aa = np.abs(Ar)
            P = np.zeros((len(rs), N))
            Q = np.zeros((len(rs), N))
            for s, e in _chunks(K, kc):
                Bc = np.asarray(Bi[s:e], dtype=np.float64)
                P += Ar[:, s:e] @ Bc
                Q += Aa[:, s:e] @ np.abs(Bc)
            cstar[rs] = P
            abssum[rs] = Q
        return cstar, abssum

    def exact_elements(self, A, B, quads):
        """Float64 recomputation of single elements: quads (a_index, b_index, i, j)."""
        out = np.zeros(len(quads))
        outa = np.zeros(len(quads))
        for t, (ai, bi, i, j) in enumerate(quads):
            a = np.asarray(A[ai][i], dtype=np.float64)
            b = np.asarray(B[bi][:, j], dtype=np.float64)
            out[t] = a @ b
            outa[t] = np.abs(a) @ np.abs(b)
        return out, outa

    def set_elements(self, C, quads_values, inplace: bool):
        D = C if inplace else C.copy()
        for (ci, i, j), v in quads_values:
            D[ci + (i, j)] = v
        return D


NUMPY_OPS = NumpyOps()


def _cpu_gemv(X, v):
    """X v for a C-contiguous 2-D CPU tensor through torch.mv's own MKL function, called
    directly (what the compiled stage 1 calls: the same numbers), or None."""
    from . import _cblas
    from ._screen import _fastc as fastc

    if fastc is None or X.requires_grad or v.requires_grad or not X.is_contiguous() \
            or not v.is_contiguous() or v.dtype != X.dtype:
        return None
    fns = _cblas.mkl_gemv()
    if not fns:
        return None
    out = X.new_empty(X.shape[0])
    fastc.gemv(fns["float32" if X.element_size() == 4 else "float64"], fns["ilp64"],
               X.numpy(), v.numpy(), out.numpy())
    return out


def split3(torch, v):
    """A float32 vector v as the columns (hi, mid, lo) of a K x 3 bfloat16 matrix
    whose row sums are v to about 2^-24 relative (8 + 8 + 8 significant bits;
    bfloat16 has float32's exponent range, so no part overflows)."""
    hi = v.to(torch.bfloat16)
    r1 = v - hi.float()
    mid = r1.to(torch.bfloat16)
    lo = (r1 - mid.float()).to(torch.bfloat16)
    return torch.stack((hi, mid, lo), dim=1)


class TorchOps(NumpyOps):
    """The same operations with torch on the tensors' device."""

    name = "torch"

    def __init__(self, device):
        import torch  # lazy: only when a tensor was passed

        self.torch = torch
        self.device = device
        self._map = {
            torch.float64: "float64", torch.float32: "float32", torch.float16: "float16",
            torch.bfloat16: "bfloat16",
        }
        for name in ("float8_e4m3fn", "float8_e5m2"):
            if hasattr(torch, name):
                self._map[getattr(torch, name)] = name

    def format_name(self, x) -> str | None:
        return self._map.get(x.dtype)

    @staticmethod
    def dtype_str(x) -> str:
        return str(x.dtype).replace("torch.", "")

    def compute_dtype(self, fmt_name: str):
        return self.torch.float64 if fmt_name == "float64" else self.torch.float32

    def host_dtype(self, cdtype):
        return np.dtype(np.float64 if cdtype == self.torch.float64 else np.float32)

    def from_host(self, v, dtype):
        torch = self.torch
        npdt = np.float64 if dtype == torch.float64 else np.float32
        t = torch.from_numpy(np.ascontiguousarray(v, dtype=npdt))
        return t if self.device.type == "cpu" else t.to(self.device, non_blocking=False)

    def to_host(self, x) -> np.ndarray:
        if x.device.type != "cpu":
            x = x.cpu()
        if x.requires_grad:
            x = x.detach()
        if x.dtype in (self.torch.float32, self.torch.float64):
            return x.numpy()
        return x.double().numpy()

    def host_view(self, X):
        """A CPU tensor as a numpy array sharing its memory (bfloat16 / float8
        through ml_dtypes); None on other devices."""
        if X.device.type != "cpu":
            return None
        if X.requires_grad:
            X = X.detach()
        torch = self.torch
        if X.dtype in (torch.float32, torch.float64, torch.float16):
            return X.numpy()
        name = self._map.get(X.dtype)
        if name is None:
            return None
        bits = torch.int16 if X.element_size() == 2 else torch.uint8
        return X.view(bits).numpy().view(NUMPY_FORMATS[name])

    def to_host64(self, x) -> np.ndarray:
        x = x.detach()
        if x.device.type != "cpu":
            x = x.cpu()
        if x.dtype in (self.torch.float32, self.torch.float64):
            return np.asarray(x.numpy(), dtype=np.float64)
        return x.double().numpy()

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def exact_mode(self):
        """No autograd, and no TF32 / reduced-precision reductions on CUDA."""
        if self.device.type != "cuda" and not self.torch.is_grad_enabled():
            return contextlib.nullcontext()
        return self._exact_mode()

    @contextlib.contextmanager
    def _exact_mode(self):
        torch = self.torch
        with torch.no_grad():
            if self.device.type != "cuda":
                yield
                return
            m = torch.backends.cuda.matmul
            saved = (m.allow_tf32, getattr(m, "allow_fp16_reduced_precision_reduction", None),
                     getattr(m, "allow_bf16_reduced_precision_reduction", None))
            m.allow_tf32 = False
            try:
                yield
            finally:
                m.allow_tf32 = saved[0]

    def matvec(self, X, v, cdtype):
        torch = self.torch
        if X.dtype == cdtype:
            if X.dim() == 2 and v.dim() == 1:
                if X.device.type == "cpu":
                    z = _cpu_gemv(X, v)
                    if z is not None:
                        return z
                return torch.mv(X, v)
            return torch.matmul(X, v.unsqueeze(-1)).squeeze(-1)
        if X.device.type == "cpu":
            # narrow formats on the CPU, through a host view: bfloat16 / float16 by MKL's
            # mixed-precision product (torch's own threads), others widened chunk by chunk
            # (torch's own conversion is threaded: each chunk's parallel region waits for
            # the second core, which on a busy machine costs milliseconds per chunk --
            # measured 100x the floor at n = 2048)
            hv = self.host_view(X)
            if hv is not None:
                vh = v.detach().numpy()
                return torch.from_numpy(NUMPY_OPS.matvec(hv, vh, vh.dtype.type,
                                                         own_threads=True))
        elif X.dim() == 2 and v.dim() == 1 and cdtype == torch.float32 and \
                X.dtype == torch.bfloat16 and self._mm_dtype is not False:
            z = self._matvec_16(X, v)
            if z is not None:
                return z
        M, K = X.shape[-2:]
        full = tuple(torch.broadcast_shapes(tuple(X.shape[:-2]), tuple(v.shape[:-1])))
        out = torch.empty(full + (M,), dtype=cdtype, device=X.device)
        rows = max(1, (CHUNK_ELEMS if X.device.type == "cpu" else DEVICE_CHUNK_ELEMS)
                   // max(K, 1))
        for idx in np.ndindex(*full):
            xi = X[sub_index(idx, tuple(X.shape[:-2]))]
            vi = v[sub_index(idx, tuple(v.shape[:-1]))]
            o = out[idx]
            for s, e in _chunks(M, rows):
                torch.mv(xi[s:e].to(cdtype), vi, out=o[s:e])
        return out

    _mm_dtype = None  # whether torch.mm(..., out_dtype=float32) works here (None: untried)

    def _matvec_16(self, X, v):
        """X (bfloat16, on an accelerator) times a float32 vector in one pass over
        X: v split into three bfloat16 parts (float32 precision, see
        :func:`split3`) as the columns of a K x 3 matrix, multiplied with float32
        output (``torch.mm(..., out_dtype=)``); None where that is unsupported."""
        torch = self.torch
        try:
            V = split3(torch, v)
            z = torch.mm(X, V, out_dtype=torch.float32).sum(dim=1)
        except (RuntimeError, TypeError, NotImplementedError):
            type(self)._mm_dtype = False
            return None
        type(self)._mm_dtype = True
        return z

    def matmat(self, X, V, cdtype):
        torch = self.torch
        if X.dtype == cdtype:
            return torch.matmul(X, V)
        M, K = X.shape[-2:]
        full = tuple(torch.broadcast_shapes(tuple(X.shape[:-2]), tuple(V.shape[:-2])))
        out = torch.empty(full + (M, V.shape[-1]), dtype=cdtype, device=X.device)
        rows = max(1, CHUNK_ELEMS // max(K, 1))
        for idx in np.ndindex(*full):
            xi = X[sub_index(idx, tuple(X.shape[:-2]))]
            vi = V[sub_index(idx, tuple(V.shape[:-2]))]
            o = out[idx]
            for s, e in _chunks(M, rows):
                torch.matmul(xi[s:e].to(cdtype), vi, out=o[s:e])
        return out

    def vecmat(self, s, X, cdtype):
        torch = self.torch
        if X.dtype == cdtype:
            return torch.matmul(s, X)
        batch = tuple(X.shape[:-2])
        M, N = X.shape[-2:]
        out = torch.zeros(batch + (N,), dtype=cdtype, device=X.device)
        rows = max(1, CHUNK_ELEMS // max(N, 1))
        for idx in np.ndindex(*batch):
            for a, b in _chunks(M, rows):
                out[idx] += torch.mv(X[idx][a:b].to(cdtype).T, s[a:b])
        return out

    def row_sq(self, X, rows) -> np.ndarray:
        hv = self.host_view(X)
        if hv is not None:
            return NumpyOps.row_sq(hv, rows)
        return self.row_norms(X, rows) ** 2

    def row_norms(self, X, rows) -> np.ndarray:
        hv = self.host_view(X)
        if hv is not None:
            return NumpyOps.row_norms(self, hv, rows)
        torch = self.torch
        if rows is None:
            rows = np.arange(X.shape[-2])
        idx = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        if X.device.type != "cpu":
            idx = idx.to(X.device)
        sub = X.detach().index_select(X.dim() - 2, idx)
        if sub.dtype not in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
            sub = sub.float()  # float8: no reductions
        nrm = torch.linalg.vector_norm(sub, dim=-1, dtype=torch.float64)
        return nrm.cpu().numpy() if nrm.device.type != "cpu" else nrm.numpy()

    def row_weighted_sq(self, X, w) -> np.ndarray:
        hv = self.host_view(X)
        if hv is not None:
            return NumpyOps.row_weighted_sq(hv, w)
        torch = self.torch
        Xf = X.detach().to(torch.float64 if X.dtype == torch.float64 else torch.float32)
        wt = torch.as_tensor(np.asarray(w), dtype=Xf.dtype, device=X.device)
        return (Xf * Xf).matmul(wt).double().cpu().numpy()

    def col_norms(self, X, cols) -> np.ndarray:
        hv = self.host_view(X)
        if hv is not None:
            return NumpyOps.col_norms(hv, cols)
        return self.row_norms(X.transpose(-1, -2), cols)

    @staticmethod
    def rows_contiguous(X) -> bool:
        return X.stride(-1) == 1

    def all_finite(self, X) -> bool:
        torch = self.torch
        if X.numel() == 0:
            return True
        if X.dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
            return bool(torch.isfinite(X).all())
        return bool(torch.isfinite(X.float()).all())

    def nonfinite_positions(self, X, limit: int = 10) -> list[tuple]:
        torch = self.torch
        bad = ~torch.isfinite(X.float() if X.dtype not in (torch.float64, torch.float32) else X)
        pos = torch.nonzero(bad)[:limit].cpu().numpy()
        return [tuple(int(v) for v in p) for p in pos]

    def take(self, X, index: tuple) -> np.ndarray:
        return X[index].detach().to("cpu").double().numpy()

    def exact_rows(self, A, B, pairs):
        if A.device.type == "cpu" and B.device.type == "cpu":
            # numpy's float64 product on host views: a few rows cost microseconds there,
            # against a dozen calls into torch
            try:
                ah, bh = self.host_view(A), self.host_view(B)
            except (RuntimeError, TypeError):  # (a tensor numpy cannot view)
                ah = bh = None
            if ah is not None and bh is not None:
                return NUMPY_OPS.exact_rows(ah, bh, pairs)
        torch = self.torch
        N = B.shape[-1]
        K = B.shape[-2]
        R = len(pairs)
        cstar = np.zeros((R, N))
        abssum = np.zeros((R, N))
        groups: dict[tuple, list[int]] = {}
        for r, (ai, bi, i) in enumerate(pairs):
            groups.setdefault(bi, []).append(r)
        kc = max(1, EXACT_CHUNK_ELEMS // max(N, 1))
        for bi, rs in groups.items():
            Bi = B[bi]
            Ar = torch.stack([A[pairs[r][0]][pairs[r][2]].double() for r in rs])
            Aa = Ar.abs()
            P = torch.zeros((len(rs), N), dtype=torch.float64, device=A.device)
            Q = torch.zeros_like(P)
            for s, e in _chunks(K, kc):
                Bc = Bi[s:e].double()
                P += Ar[:, s:e] @ Bc
                Q += Aa[:, s:e] @ Bc.abs()
            cstar[rs] = P.cpu().numpy()
            abssum[rs] = Q.cpu().numpy()
        return cstar, abssum

    def exact_elements(self, A, B, quads):
        out = np.zeros(len(quads))
        outa = np.zeros(len(quads))
        for t, (ai, bi, i, j) in enumerate(quads):
            a = A[ai][i].double()
            b = B[bi][:, j].double()
            out[t] = float(a @ b)
            outa[t] = float(a.abs() @ b.abs())
        return out, outa

    def set_elements(self, C, quads_values, inplace: bool):
        D = C if inplace else C.clone()
        for (ci, i, j), v in quads_values:
            D[ci + (i, j)] = v
        return D
