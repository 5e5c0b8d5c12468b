"""Stage 1 of the Freivalds check: the random signs, the three projections,
the residual and the screen -- the part every call pays for.

Everything here is O(M + N + K) beyond the three matrix-vector products, and
written so that its fixed cost stays small next to those passes (a handful of
small operations, or one compiled call): the signs come from a counter-based
generator (SplitMix64) straight into the check's dtype, the screen's row scales come
from a few sampled rows read through host views (no device round trips for
CPU tensors), and a product whose residual stays under the threshold leaves
without any per-row bookkeeping.  See docs/freivalds.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from . import _cblas
from . import _model as model
from ._backend import NUMPY_OPS, NumpyOps, aligned_empty, scratch

try:  # the per-call O(n) work compiled (optional: the same arithmetic in numpy otherwise)
    from . import _fastc
except ImportError:  # pragma: no cover - exercised where no C compiler was available
    _fastc = None

#: Rows sampled per matrix for the screen's row scales; products with at most
#: SMALL_ROWS rows in all use every row.
SAMPLE_ROWS = 4
SMALL_ROWS = 64

_M64 = (1 << 64) - 1
SEED_END = 1 << 128  # seeds are two 64-bit words: [0, SEED_END)
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64(x: int) -> int:
    """SplitMix64's finaliser on a Python int (mod 2^64)."""
    x = (x + _GOLDEN) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _mix64_np(x: np.ndarray) -> np.ndarray:
    """:func:`_mix64` on a uint64 array (numpy's uint64 arithmetic wraps mod 2^64)."""
    x = x + np.uint64(_GOLDEN)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def sign_key(seed: int, stream: int, attempt: int) -> int:
    """The 64-bit key of the signs of (seed, stream, attempt)."""
    lo, hi = seed & _M64, seed >> 64
    return _mix64(_mix64(lo) ^ hi ^ _mix64((stream << 8) | attempt))


def signs(seed: int, stream: int, n: int, dtype=np.int8) -> np.ndarray:
    """n random +-1 signs from (seed, stream), reproducibly, as a contiguous array of
    ``dtype`` (int8, float32 or float64).

    Word j of attempt a is SplitMix64's finaliser of key + j * 0x9E3779B97F4A7C15, with
    key = mix(mix(seed mod 2^64) ^ (seed >> 64) ^ mix(stream * 256 + a)); its 64 bits,
    most significant first, are signs n = 64 j .. 64 j + 63 (bit 1 is -1).  Signs whose
    sum is smaller than sqrt(n)/4 in magnitude are redrawn (the next attempt), so that an
    offset added to a whole row (or column) of C never cancels out of the residual;
    otherwise the signs are independent and fair.  Seeds are below 2^128."""
    if not 0 <= seed < SEED_END:
        raise ValueError(f"seeds are integers in [0, 2^128), got {seed}")
    kind = _SIGN_KINDS.get(dtype)
    if kind is None:
        kind = _SIGN_KINDS[np.dtype(dtype)]
        dtype = np.dtype(dtype).type
    if _fastc is not None:  # one compiled pass
        out = np.empty(n, dtype=dtype)
        _fastc.signs(seed & _M64, seed >> 64, stream, n, out, kind)
        return out
    limit = 0.25 * math.sqrt(n)
    words = (n + 63) // 64
    steps = np.arange(words, dtype=np.uint64) * np.uint64(_GOLDEN)
    for attempt in range(64):
        w = _mix64_np(np.uint64(sign_key(seed, stream, attempt)) + steps)
        bits = np.unpackbits(w.astype(">u8").view(np.uint8), count=n)
        r = _SIGN_TABLE[kind][bits]
        if n < 16 or abs(float(r.sum(dtype=np.float64))) >= limit:
            break
    return r


_SIGN_TABLE = [np.array([1, -1], dtype=dt) for dt in (np.float32, np.float64, np.int8)]


_SIGN_KINDS = {}
for _k, _dt in enumerate((np.float32, np.float64, np.int8)):
    _SIGN_KINDS[_dt] = _SIGN_KINDS[np.dtype(_dt)] = _k


def rademacher(seed: int, stream: int, n: int) -> np.ndarray:
    """n random +-1 signs (int8) from (seed, stream); see :func:`signs`."""
    return signs(seed, stream, n, np.int8)


def group_of(N: int, G: int) -> np.ndarray:
    """Group of each column: G contiguous blocks of (nearly) equal width."""
    return (np.arange(N, dtype=np.int64) * G) // N


@dataclass
class Projection:
    """A right-operand projection supplied from outside (the guard's cache):
    r on the device, y = B r, r on the host, and rms_k ||B_k|| (or None)."""

    rd: Any
    y: Any
    r: np.ndarray
    b_rms: Optional[float] = None
    #: host forms of r and y, made once: y as 16-bit columns for MKL's mixed-precision
    #: product per operand dtype, r and y as contiguous float32 ("host32")
    cols: dict = field(default_factory=dict)


def stage1(p, rounds: int, seed: int, cdtype, pre=None):
    """z = A (B r) and w = C r for each round, as host arrays of shape
    (rounds, batch..., M, groups) (float32 or float64, whatever the check ran
    in; the residual is formed in float64).  ``pre``: a callable (problem,
    cdtype) -> :class:`Projection` supplying a cached B r (the guard)."""
    ops = p.ops
    G = p.groups
    if rounds == 1 and G == 1:  # the common case, without stacking
        z, w = _round(p, 0, seed, cdtype, pre)
        return z[None, ..., None], w[None, ..., None]
    zs, ws = [], []
    for k in range(rounds):
        if G > 1:
            r = rademacher(seed, k, p.N)
            R = np.zeros((p.N, G), dtype=np.float64)
            R[np.arange(p.N), group_of(p.N, G)] = r
            rd = ops.from_host(R, cdtype)
            y = ops.matmat(p.b, rd, cdtype)
            z = ops.to_host(ops.matmat(p.a, y, cdtype)).astype(np.float64)
            w = ops.to_host(ops.matmat(p.c, rd, cdtype))
            if p.bias is not None:
                z = z + p.bias @ R
        else:
            z, w = _round(p, k, seed, cdtype, pre)
            z, w = z[..., None], w[..., None]
        zs.append(z)
        ws.append(w)
    return np.stack(zs), np.stack(ws)


def _round(p, k: int, seed: int, cdtype, pre):
    """One round with a single residual: (z, w) of shape (batch..., M)."""
    ops = p.ops
    if pre is not None:
        pr = pre(p, cdtype)
        rd, y, r = pr.rd, pr.y, pr.r
        p.b_rms = pr.b_rms
    else:
        r = signs(seed, k, p.N, ops.host_dtype(cdtype))
        rd = ops.from_host(r, cdtype)
        y = stage1_matvec(ops, p.b, rd, cdtype, host=False)
    if k == 0:
        p.y = y
    z = stage1_matvec(ops, p.a, y, cdtype)
    w = stage1_matvec(ops, p.c, rd, cdtype)
    if p.bias is not None:
        z = z + float(p.bias @ r)
    return z, w


def stage1_matvec(ops, X, v, cdtype, host: bool = True):
    """X v as the compiled stage 1 makes it: for a C-contiguous float32 host matrix by the
    row kernel it uses there (``_fastc.rows_dot``) wherever ``_fastc.own_gemv`` holds
    (every such matrix where the CPU has AVX-512; see _fastc.c: the kernel measured faster
    than the back ends' BLAS gemv), so that this path and the compiled one decide alike to
    the bit; otherwise the back end's matvec.  ``host``: a host array, else in the back
    end's type (a tensor for torch)."""
    out = _own_rows_dot(ops, X, v, cdtype)
    if out is not None:
        return out if host or ops is NUMPY_OPS else ops.torch.from_numpy(out)
    out = ops.matvec(X, v, cdtype)
    return ops.to_host(out) if host else out


def _own_rows_dot(ops, X, v, cdtype) -> Optional[np.ndarray]:
    """:func:`stage1_matvec` by the row kernel, or None where the compiled stage 1 does not
    make it with it."""
    if _fastc is None or len(X.shape) != 2 or not _fastc.own_gemv(*X.shape):
        return None
    numpy = ops is NUMPY_OPS
    try:
        xh, vh = (X, v) if numpy else (ops.host_view(X), ops.host_view(v))
    except RuntimeError:  # (a tensor numpy cannot view: a negation or conjugation bit)
        return None
    if xh is None or vh is None or xh.dtype != np.float32 or vh.dtype != np.float32 \
            or np.dtype(ops.host_dtype(cdtype)) != np.float32 or vh.ndim != 1 \
            or not (xh.flags.c_contiguous and vh.flags.c_contiguous):
        return None
    out = np.empty(xh.shape[0], dtype=np.float32)
    return out if _fastc.rows_dot(xh, vh, out, _cblas.pool_for(numpy)) else None


def residual(z, w) -> np.ndarray:
    """|z - w| in float64."""
    d = np.subtract(z, w, dtype=np.float64)
    return np.abs(d, out=d)


# ---------------------------------------------------------------------------
# the screen's row scales
# ---------------------------------------------------------------------------

_MASK64 = (1 << 64) - 1


def sample_rows(seed: int, n: int, k: int) -> np.ndarray:
    """k distinct indices in [0, n) drawn from the seed (a 64-bit LCG), sorted."""
    out: set = set()
    x = (seed ^ 0x9E3779B97F4A7C15) & _MASK64
    while len(out) < k:
        x = (x * 6364136223846793005 + 1442695040888963407) & _MASK64
        out.add((x >> 32) % n)
    return np.array(sorted(out), dtype=np.int64)


#: Below this K, rms_k ||B_k|| is sampled from rows of B rather than read off y = B r.
MIN_K_FROM_Y = 64


def b_rms(p, seed: int, y=None):
    """rms_k ||B_k|| = ||B||_F / sqrt(K) per matrix of B (batch_b...).

    From y = B r when K is large (E y_k^2 = ||B_k||^2 for +-1 signs, so
    ||y||^2 / K estimates it with relative error about sqrt(2/K), without
    reading B again); otherwise sampled from rows of B, or from its columns
    when those are the contiguous ones (B = W^T in a linear layer)."""
    ops = p.ops
    if y is not None and p.K >= MIN_K_FROM_Y:
        yh = ops.host_view(y)
        if yh is not None:
            if yh.ndim == 1:
                with np.errstate(over="ignore"):  # (an overflow: read off B instead)
                    v = float(np.dot(yh, yh))
                if math.isfinite(v):
                    return math.sqrt(v / p.K)
            else:
                v = np.vecdot(yh, yh).astype(np.float64)
                if np.isfinite(v).all():
                    return np.sqrt(v / p.K)
    if ops.rows_contiguous(p.b) or p.N <= SAMPLE_ROWS:
        krows = None if p.K <= SAMPLE_ROWS else sample_rows(seed + 1, p.K, SAMPLE_ROWS)
        bn2 = ops.row_sq(p.b, krows).astype(np.float64)  # (batch_b..., kr)
        return np.sqrt(bn2.mean(axis=-1))
    jcols = sample_rows(seed + 2, p.N, SAMPLE_ROWS)
    bn = ops.col_norms(p.b, jcols)
    return np.sqrt((bn * bn).mean(axis=-1) * p.N / max(p.K, 1))


def _block_sq(ops, X, i0: int, k: int) -> float:
    """Mean squared norm of rows i0 .. i0 + k - 1 of a 2-D X."""
    hv = ops.host_view(X)
    if hv is None:
        return float(np.mean(ops.row_norms(X, np.arange(i0, i0 + k)) ** 2))
    return host_block_sq(hv, i0, k)


def host_block_sq(hv: np.ndarray, i0: int, k: int) -> float:
    """Mean squared norm of rows i0 .. i0 + k - 1 of a 2-D host array (float32 sums,
    float64 where those overflow)."""
    sub = hv[i0:i0 + k]
    if sub.dtype != np.float32 and sub.dtype != np.float64:
        sub = sub.astype(np.float32)
    ss = float(np.vdot(sub, sub))
    if not math.isfinite(ss):
        sub = sub.astype(np.float64)
        ss = float(np.vdot(sub, sub))
    return ss / k


def host_b_rms(yh: np.ndarray, K: int) -> Optional[float]:
    """rms_k ||B_k|| from a host y = B r of one matrix (K >= MIN_K_FROM_Y), or None."""
    with np.errstate(over="ignore"):  # (an overflow: None)
        v = float(np.dot(yh, yh))
    return math.sqrt(v / K) if math.isfinite(v) else None


def single_scales(ah: np.ndarray, ch: np.ndarray, seed: int, M: int, brms: float):
    """:func:`row_scales` of one matrix from host views of A and C (floats)."""
    if M <= SMALL_ROWS:
        cn2 = float(NumpyOps.row_sq(ch, None).max())
        cn = math.sqrt(cn2) if math.isfinite(cn2) else 0.0
        return cn, math.sqrt(float(NumpyOps.row_sq(ah, None).max())) * brms
    k = min(SAMPLE_ROWS, M)
    i0 = seed % (M - k + 1)
    cn2 = host_block_sq(ch, i0, k)
    cn = math.sqrt(cn2) if math.isfinite(cn2) else 0.0
    return cn, math.sqrt(host_block_sq(ah, i0, k)) * brms


_KINDS = {np.dtype(np.float32): 0, np.dtype(np.float64): 1}
_BLOCK_KINDS = {np.dtype(np.float32): 0, np.dtype(np.float64): 1,
                np.dtype("float16"): 3}


def _block_kind(x: np.ndarray):
    k = _BLOCK_KINDS.get(x.dtype)
    if k is None and x.dtype.itemsize == 2 and x.dtype.name == "bfloat16":
        return 2
    return k


def scale_from_stats(M: int, K: int, N: int, k: int, k9: int, dmax: float, dk: float,
                     dk9: float, css: float, ass: float, yss: float, brms: Optional[float],
                     units, coef: Optional[tuple] = None):
    """(None, dmax, scale, calibrated) from the compiled pass's statistics (see
    :func:`screen_one`): the row scales of ``k`` rows (or the largest row), rms_k ||B_k||
    from sum y^2 unless ``brms`` is known, the cap and the median / 90 % calibration of
    :func:`._model.screen_scale_max`; None where rms_k ||B_k|| cannot be read off y.
    ``coef``: the cap's (alpha, beta) for (K, N, units), where the caller keeps them
    (:func:`._model.screen_cap_coefficients`; the same numbers)."""
    if brms is None:
        if K < MIN_K_FROM_Y or not math.isfinite(yss):
            return None
        brms = math.sqrt(yss / K)
    cn = math.sqrt(css / k) if math.isfinite(css) else 0.0
    sn = math.sqrt(ass / k) * brms
    cap = model.screen_cap(cn, sn, K, N, units, coef)
    if M < model.MIN_CALIBRATION_ROWS:
        return None, dmax, cap, False
    med_d = dk if k9 < 0 else max(dk, dk9 * (model.MEDIAN_ABS_NORMAL / model.Q90_ABS_NORMAL))
    scale = min(max(med_d / model.MEDIAN_ABS_NORMAL, model.FLOOR_FRACTION * cap), cap)
    return None, dmax, scale, True


def screen_plan(M: int, seed: int):
    """(k, i0, rows, kmed, k9) of the compiled pass for M rows: the row block (or every row,
    ``rows`` > 0, for at most SMALL_ROWS rows) and the order statistics wanted."""
    if M <= SMALL_ROWS:
        k, i0, rows = 1, 0, M
    else:
        k, rows = min(SAMPLE_ROWS, M), 0
        i0 = seed % (M - k + 1)
    calib = M >= model.MIN_CALIBRATION_ROWS
    k9 = int(0.9 * M) if calib and M >= model.TAIL_CALIBRATION_ROWS else -1
    return k, i0, rows, (M // 2 if calib else 0), k9


def screen_one(z: np.ndarray, w: Optional[np.ndarray], ah: np.ndarray, ch: np.ndarray,
               yh: Optional[np.ndarray], brms: Optional[float], seed: int, M: int, K: int,
               N: int, units):
    """The residual, row scales and calibrated screen of one matrix, one round, one group,
    from host arrays: |z - w| (``w`` None: ``z`` is |d| already), c_norm and s_norm as
    :func:`row_scales` reads them (``brms`` if known, else from ``yh`` = B r) and
    :func:`._model.screen_scale_max`.  Returns (d, dmax, scale, calibrated) -- d is None
    where the compiled pass formed it in a scratch buffer -- or None where rms_k ||B_k|| is
    not known (the caller reads it off B).

    One compiled pass where the helper module is there and the arrays allow it (a large
    product has just evicted the interpreter's working set, and a dozen small numpy calls
    cost more than the arithmetic); otherwise the same arithmetic in numpy."""
    kz = _KINDS.get(z.dtype)
    if _fastc is not None and kz is not None and z.flags.c_contiguous \
            and z.ndim == 1 and (w is None or (w.dtype == z.dtype and w.flags.c_contiguous)):
        k, i0, rows, kmed, k9 = screen_plan(M, seed)
        # every row (the largest norms) for small products, else a block of k rows
        cblk, ablk = (ch, ah) if rows else (ch[i0:i0 + k], ah[i0:i0 + k])
        kc, ka = _block_kind(cblk), _block_kind(ablk)
        ky = 0 if yh is None else _KINDS.get(yh.dtype)
        if kc is not None and ka is not None and ky is not None and cblk.flags.c_contiguous \
                and ablk.flags.c_contiguous and (yh is None or yh.flags.c_contiguous):
            if kc == 2:
                cblk = cblk.view(np.uint16)
            if ka == 2:
                ablk = ablk.view(np.uint16)
            buf = scratch(("screen", M), lambda: np.empty(2 * M))
            dmax, dk, dk9, css, ass, yss = _fastc.screen_stats(
                z, w, kz, buf, kmed, k9, cblk, kc, ablk, ka, yh if yh is not None else z, ky,
                rows)
            if brms is None and yh is None:
                return None
            return scale_from_stats(M, K, N, k, k9, dmax, dk, dk9, css, ass, yss, brms, units)
    d = residual(z, w) if w is not None else z
    if brms is None:
        if yh is None or K < MIN_K_FROM_Y:
            return None
        brms = host_b_rms(yh, K)
        if brms is None:
            return None
    cn, sn = single_scales(ah, ch, seed, M, float(brms))
    scale, _, calibrated, dmax = model.screen_scale_max(d, cn, sn, K, N, units)
    return d, dmax, scale, calibrated


def row_scales(p, seed: int, items: int):
    """Typical ||C_i|| and sqrt(sum_k a_ik^2 ||b_k||^2) per matrix.

    Products with at most SMALL_ROWS rows in all use every row and the largest
    values.  Otherwise the RMS over SAMPLE_ROWS consecutive rows from a random
    start (O(K + N) per row), with rms_k ||B_k|| from :func:`b_rms`.  Single
    matrices get floats, batches arrays of shape (items,)."""
    ops = p.ops
    brms = None
    if not p.batch and p.b_rms is None and p.y is not None and p.K >= MIN_K_FROM_Y:
        yh = ops.host_view(p.y)
        if yh is not None and yh.ndim == 1:
            brms = host_b_rms(yh, p.K)
    if brms is None:
        brms = p.b_rms if p.b_rms is not None else b_rms(p, seed, p.y)
    if not p.batch and np.ndim(brms) == 0:
        ah, ch = ops.host_view(p.a), ops.host_view(p.c)
        if ah is not None and ch is not None:
            return single_scales(ah, ch, seed, p.M, float(brms))
    if items * p.M <= SMALL_ROWS:
        cn2 = ops.row_sq(p.c, None)  # (batch..., M)
        an2 = ops.row_sq(p.a, None)
        if not p.batch and np.ndim(brms) == 0:
            cn2 = float(cn2.max())
            cn = math.sqrt(cn2) if math.isfinite(cn2) else 0.0
            return cn, math.sqrt(float(an2.max())) * float(brms)
        cn = np.sqrt(cn2.astype(np.float64))
        sn = np.sqrt(an2.astype(np.float64)) * np.asarray(brms)[..., None]
        cn = np.broadcast_to(cn, p.batch + (p.M,)).reshape(items, p.M)
        sn = np.broadcast_to(sn, p.batch + (p.M,)).reshape(items, p.M)
        cn = np.where(np.isfinite(cn), cn, 0.0)
        return cn.max(axis=1), sn.max(axis=1)
    k = min(SAMPLE_ROWS, p.M)
    i0 = seed % (p.M - k + 1)
    if not p.batch and np.ndim(brms) == 0:
        cn2 = _block_sq(ops, p.c, i0, k)
        cn = math.sqrt(cn2) if math.isfinite(cn2) else 0.0
        return cn, math.sqrt(_block_sq(ops, p.a, i0, k)) * float(brms)
    rows = np.arange(i0, i0 + k)
    cn2 = ops.row_sq(p.c, rows).astype(np.float64)  # (batch..., k)
    sn2 = ops.row_sq(p.a, rows).astype(np.float64) * (np.asarray(brms) ** 2)[..., None]
    cn2 = np.broadcast_to(cn2, p.batch + (k,)).reshape(items, k)
    sn2 = np.broadcast_to(sn2, p.batch + (k,)).reshape(items, k)
    cn2 = np.where(np.isfinite(cn2), cn2, 0.0)
    return np.sqrt(cn2.mean(axis=1)), np.sqrt(sn2.mean(axis=1))


# ---------------------------------------------------------------------------
# the screen
# ---------------------------------------------------------------------------

@dataclass
class Screen:
    """The stage-1 decision: per-matrix thresholds and the residuals against them."""

    dI: np.ndarray  # |d| per matrix: (items, rounds * M * G)
    tau: np.ndarray  # threshold per matrix (items,)
    scale: np.ndarray  # calibrated noise scale per matrix (items,)
    calibrated: bool
    ratio: float  # max_i |d_i| / tau
    clear: bool  # no row exceeds its threshold
    y: Any = None  # B r on the host (batch..., K), where the compiled pass made it
    b_rms: Any = None  # rms_k ||B_k||, where it was known (the guard's cache)
    rows: Any = None  # (items, M) ratios after the per-row second look, where it was made


def screen(p, d: np.ndarray, rounds: int, seed: int, items: int, units,
           dmax: Optional[float] = None) -> Screen:
    """Calibrate the noise scale on the residual ``d`` (rounds, batch..., M, G)
    and compare every row with its threshold (``dmax``: max |d| if known)."""
    G = p.groups
    per = rounds * p.M * G
    if rounds == 1:
        dI = d.reshape(items, per)
    else:
        dI = np.moveaxis(d.reshape(rounds, items, p.M * G), 0, 1).reshape(items, per)
    if dmax is None:
        dmax = float(dI.max())
    finite = math.isfinite(dmax)
    dcal = dI if finite else np.where(np.isfinite(dI), dI, 0.0)
    if items == 1:
        one = _single_screen(p, dI[0], seed, units) if rounds == 1 and G == 1 and finite \
            else None
        if one is not None:
            scale, calibrated = one
        else:
            c_norm, s_norm = row_scales(p, seed, items)
            # a group of N/G columns: row norms and the check's lengths shrink with it
            gs = 1.0 / math.sqrt(G) if G > 1 else 1.0
            scale, _, calibrated = model.screen_scale_one(
                dcal[0], _scalar(c_norm) * gs, _scalar(s_norm) * gs, p.K, -(-p.N // G), units)
        t = model.LAMBDA_SCREEN * scale
        if finite:
            ratio = dmax / t if t > 0 else (math.inf if dmax > 0 else 0.0)
        else:
            ratio = math.inf
        return Screen(dI, np.array([t]), np.array([scale]), bool(calibrated), ratio,
                      ratio <= 1.0)
    c_norm, s_norm = row_scales(p, seed, items)
    gs = 1.0 / math.sqrt(G) if G > 1 else 1.0
    Ng = -(-p.N // G)
    scale, cap, calibrated = model.screen_scale(dcal, c_norm * gs, s_norm * gs, p.K, Ng, units)
    tau = model.LAMBDA_SCREEN * scale
    rmax = dI.max(axis=1) if finite else np.where(np.isfinite(dI), dI, np.inf).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rr = np.where(rmax > 0, rmax / tau, 0.0)
    ratio = float(rr.max())
    return Screen(dI, tau, scale, bool(calibrated), ratio, ratio <= 1.0)


def batch_screen(ah: np.ndarray, bh: np.ndarray, ch: np.ndarray, seed: int,
                 fns: Optional[dict], units) -> Optional[Screen]:
    """Stage 1 and the screen of a batch of matrices in one compiled call: host arrays
    a (..., M, K), b (..., K, N), c (..., M, N) of one batch shape, all float32 or all
    float64, each matrix with unit stride along one of its axes (views of transposed or
    split tensors included); one round, one group, no bias.  The signs of (seed, stream
    0) for every matrix, y_t = B_t r, z_t = A_t y_t and w_t = C_t r through the BLAS gemv
    ``fns`` names (the back end's own), and per matrix what :func:`row_scales` and
    :func:`._model.screen_scale` read for a batch: SAMPLE_ROWS rows from seed % (M - k +
    1), rms_k ||B_k|| from ||y_t||, the median and 90 % point of |d_t| (each matrix
    calibrated on its own: M >= MIN_CALIBRATION_ROWS).

    Both the common call and the general path use it where it applies, so their
    verdicts agree; None where it does not (another layout or dtype, too few rows, a
    non-finite statistic: the general path's own arithmetic decides)."""
    if _fastc is None or not fns:
        return None
    # the back end's threads, as the common call uses them (see _fastc.run_stage1_batch):
    # MKL's (torch's) matrices on torch's, numpy's float32 ones on OpenBLAS's
    _cblas.pool_for(fns.get("ilp64") != 2)
    nd = ah.ndim
    if nd < 3 or bh.ndim != nd or ch.ndim != nd:
        return None
    dt = ah.dtype
    kz = _KINDS.get(dt)
    if kz is None or bh.dtype != dt or ch.dtype != dt:
        return None
    M, K = ah.shape[-2:]
    N = bh.shape[-1]
    batch = ah.shape[:-2]
    if bh.shape[:-2] != batch or ch.shape[:-2] != batch or bh.shape[-2] != K \
            or ch.shape[-2:] != (M, N):
        return None
    items = math.prod(batch)
    if M < model.MIN_CALIBRATION_ROWS or K < MIN_K_FROM_Y or N < 16 \
            or items * M <= SMALL_ROWS:
        return None
    r, y, z, w, tmp = scratch(("batch", items, M, K, N, dt), lambda: (
        aligned_empty(N, dt), aligned_empty((items, K), dt), aligned_empty((items, M), dt),
        aligned_empty((items, M), dt), np.empty(M)))
    d, stats = np.empty((items, M)), np.empty((items, 6))
    k = SAMPLE_ROWS
    i0 = seed % (M - k + 1)
    k9 = int(0.9 * M) if M >= model.TAIL_CALIBRATION_ROWS else -1
    if not _fastc.stage1_batch(fns["float64" if kz else "float32"], fns["ilp64"], ah, bh, ch,
                               seed & _M64, seed >> 64, r, y, z, w, d, tmp, i0, k, M // 2, k9,
                               stats):
        return None
    dmax, dk, dk9, css, ass, yss = stats.T
    if not (np.isfinite(stats[:, (0, 1, 3, 4, 5)]).all() and (k9 < 0 or np.isfinite(dk9).all())):
        return None
    cn = np.sqrt(css / k)
    sn = np.sqrt(ass / k) * np.sqrt(yss / K)
    cap = model.screen_cap(cn, sn, K, N, units)
    med_d = dk if k9 < 0 else np.maximum(dk, dk9 * (model.MEDIAN_ABS_NORMAL
                                                    / model.Q90_ABS_NORMAL))
    scale = np.clip(med_d / model.MEDIAN_ABS_NORMAL, model.FLOOR_FRACTION * cap, cap)
    tau = model.LAMBDA_SCREEN * scale
    with np.errstate(divide="ignore", invalid="ignore"):
        rr = np.where(dmax > 0, dmax / tau, 0.0)
    ratio = float(rr.max())
    clear = ratio <= 1.0
    return Screen(d, tau, scale, True, ratio, clear,
                  None if clear else y.reshape(batch + (K,)).copy())


def _single_screen(p, d: np.ndarray, seed: int, units):
    """(scale, calibrated) of one 2-D matrix's finite |d| through :func:`screen_one` (the
    common call's arithmetic) with rms_k ||B_k|| as :func:`row_scales` finds it, or None
    for a batch or where the operands have no host views."""
    ops = p.ops
    if p.batch:  # a batch of one matrix: the general arithmetic
        return None
    ah, ch = ops.host_view(p.a), ops.host_view(p.c)
    if ah is None or ch is None:
        return None
    yh = None
    if p.b_rms is None and p.y is not None and p.K >= MIN_K_FROM_Y:
        yh = ops.host_view(p.y)
        yh = yh if yh is not None and yh.ndim == 1 else None
    brms = p.b_rms if p.b_rms is not None else (None if yh is not None else
                                                 b_rms(p, seed, p.y))
    one = screen_one(d, None, ah, ch, yh, brms, seed, p.M, p.K, p.N, units)
    return None if one is None else (one[2], one[3])


def _scalar(x) -> float:
    return x if type(x) is float else float(np.reshape(x, -1)[0])


def ratio_rows(p, s: Screen, rounds: int, items: int) -> np.ndarray:
    """max over rounds and groups of |d_i| / tau per row: (items, M)."""
    dI = s.dI
    finite = np.isfinite(dI)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(dI > 0, dI / s.tau[:, None], 0.0)
    ratio = np.where(finite, ratio, np.inf)
    return ratio.reshape(items, rounds, p.M, p.groups).max(axis=(1, 3))


# ---------------------------------------------------------------------------
# per-row noise: a second look at screened rows (only when some are screened)
# ---------------------------------------------------------------------------

#: A screened row's threshold is raised by its relative model noise rho_i only
#: when rho_i is at least this (homogeneous products, whose rows' noise differs
#: by a few per cent, keep their thresholds exactly).
ROW_RELIEF_MIN = 1.5


def row_noise(p, ai: tuple, bi: tuple, ci: tuple, units) -> Optional[np.ndarray]:
    """Model noise of the residual of every row of one matrix, up to a common
    factor: :func:`._model.screen_cap` per row, with c_i = ||C_i|| and s_i^2 =
    sum_k a_ik^2 ||B_k||^2 (its CAP_SLACK is the common factor, which the ratio
    to the median cancels).  Costs a pass over A, B and C of that matrix; None
    when a norm overflows."""
    ops = p.ops
    A, B, C = p.a[ai] if ai else p.a, p.b[bi] if bi else p.b, p.c[ci] if ci else p.c
    c2 = ops.row_sq(C, None).astype(np.float64)
    b2 = ops.row_sq(B, None).astype(np.float64)
    s2 = ops.row_weighted_sq(A, b2)
    if not (np.isfinite(c2).all() and np.isfinite(s2).all()):
        return None
    return model.screen_cap(np.sqrt(c2), np.sqrt(s2), p.K, p.N, units)


def _batch_relief(p, ratio_rows_: np.ndarray, screened: np.ndarray, units):
    """:func:`row_relief` of a batch (one batch shape for a, b and c; host views of float32
    or float64 matrices with a unit stride) in one compiled pass over the screened
    matrices and a few array operations; None where that does not apply."""
    if _fastc is None or not p.batch or p.batch_a != p.batch or p.batch_b != p.batch:
        return None
    ops = p.ops
    hv = [ops.host_view(x) for x in (p.a, p.b, p.c)]
    if any(x is None for x in hv) or hv[0].dtype not in _KINDS \
            or not hv[0].dtype == hv[1].dtype == hv[2].dtype:
        return None
    n = len(screened)
    c2, s2 = np.empty((n, p.M)), np.empty((n, p.M))
    if not _fastc.row_noise_batch(*hv, screened.astype(np.int64), c2, s2, np.empty(p.K)):
        return None
    sig = model.screen_cap(np.sqrt(c2), np.sqrt(s2), p.K, p.N, units)
    med = np.median(sig, axis=1)
    use = np.isfinite(c2).all(axis=1) & np.isfinite(s2).all(axis=1) & (med > 0)
    if not use.any():
        return ratio_rows_
    rho = sig[use] / med[use, None]
    out = ratio_rows_.copy()
    rows = screened[use]
    out[rows] = ratio_rows_[rows] / np.where(rho >= ROW_RELIEF_MIN, rho, 1.0)
    return out


def row_relief(p, ratio_rows_: np.ndarray, units) -> np.ndarray:
    """Screened rows judged against their own noise: for each matrix with a
    screened row (and enough rows to have calibrated the screen), rho_i =
    sigma_i / median_i sigma_i from :func:`row_noise`, and a row's ratio
    |d_i| / tau is divided by rho_i where rho_i >= ROW_RELIEF_MIN.  The
    calibrated threshold tau is the median row's noise times LAMBDA_SCREEN,
    so this holds a row whose model noise is rho_i times the median's to the
    same multiple of its own noise.  Returns the adjusted (items, M) ratios."""
    from ._backend import sub_index

    if p.groups > 1 or p.M < model.MIN_CALIBRATION_ROWS:
        return ratio_rows_
    screened = np.flatnonzero((ratio_rows_ > 1.0).any(axis=1))
    if not len(screened):
        return ratio_rows_
    fast = _batch_relief(p, ratio_rows_, screened, units)
    if fast is not None:
        return fast
    out = ratio_rows_
    for t in screened:
        idx = tuple(int(v) for v in np.unravel_index(int(t), p.batch)) if p.batch else ()
        sig = row_noise(p, sub_index(idx, p.batch_a), sub_index(idx, p.batch_b), idx, units)
        if sig is None:
            continue
        med = float(np.median(sig))
        if not med > 0:
            continue
        rho = sig / med
        if not (rho >= ROW_RELIEF_MIN).any():
            continue
        relief = np.where(rho >= ROW_RELIEF_MIN, rho, 1.0)
        if out is ratio_rows_:
            out = ratio_rows_.copy()
        out[t] = ratio_rows_[t] / relief
    return out
