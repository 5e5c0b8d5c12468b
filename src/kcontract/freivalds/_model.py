"""The rounding-error model behind the Freivalds check and its thresholds.

Everything here is pure numpy on small arrays; docs/freivalds.md derives the
formulas.  Two thresholds exist:

* the **screen** (stage 1) works on the O(n) residual vector ``d = A(Br) - Cr``
  and decides which rows deserve a closer look.  It is calibrated on the
  residual itself and never fails a product on its own;
* the **element bound** (stage 2) is the decision.  For a screened row the
  product row is recomputed in float64 and every element error is compared
  with a per-element bound derived from the probabilistic rounding model below,
  valid for any summation order.

Model (M).  ``C_ij`` is the sum of the K exact products ``a_ik b_kj`` formed in
the accumulator format (unit roundoff ``u_acc``) by K-1 additions (or FMAs) in
*any* order or blocking, then rounded once to the output format (``u_out``).
Each addition's relative rounding error ``delta`` satisfies ``|delta| <= u_acc``,
has mean zero given all earlier errors, and variance at most ``u_acc**2 / 3``
(round-to-nearest errors spread over half an ulp).  Every partial sum is a sum
of a subset of the terms, so its magnitude is at most
``m_ij = (sum_k |a_ik b_kj| + |C*_ij|) / 2`` (the larger of the positive and the
negative mass).  The accumulated error is then a martingale with increments
bounded by ``u_acc m_ij`` and conditional variance at most ``V_ij =
u_acc**2 (K+3) m_ij**2 / 3`` (the +3 covers separately rounded products), and
Bernstein's inequality gives ``P(|err| >= t) <= 2 exp(-t**2 / (2 V + 2 b t / 3))``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

#: Stage-1 multiplier: a row is screened when |d_i| exceeds LAMBDA_SCREEN times
#: the calibrated noise scale (5.7e-7 per row for Gaussian noise; a screened
#: row costs one float64 recomputation, never a false alarm).
LAMBDA_SCREEN = 5.0
#: Median of |N(0,1)|: converts a median into a scale.
MEDIAN_ABS_NORMAL = 0.6744897501960817
#: 90th percentile of |N(0,1)|.
Q90_ABS_NORMAL = 1.6448536269514722
#: Rows needed to calibrate the screen on the residual itself (median), and
#: to use its 90th percentile as well.
MIN_CALIBRATION_ROWS = 64
TAIL_CALIBRATION_ROWS = 200
#: Slack of the screen's model cap (honest data with drift or cancellation).
CAP_SLACK = 2.0
#: The calibrated screen never goes below this fraction of the cap.
FLOOR_FRACTION = 0.02


@dataclass(frozen=True)
class Units:
    """Unit roundoffs of the quantities the model needs."""

    acc: float  # accumulator of the checked product
    out: float  # output format of C
    check: float  # arithmetic of the stage-1 check (float32 or float64 gemv)
    recompute: float  # arithmetic of the stage-2 recomputation (float64)
    acc_tiny: float  # smallest subnormal of the accumulator (absolute error floor)
    out_tiny: float


def bernstein_t(V: np.ndarray, b: np.ndarray, L: float) -> np.ndarray:
    """Smallest t with 2 exp(-t^2 / (2V + 2bt/3)) <= 2 exp(-L), i.e. the
    deviation a sum with variance V and increments bounded by b exceeds with
    probability at most 2 e^{-L}."""
    bl = b * L / 3.0
    return bl + np.sqrt(bl * bl + 2.0 * V * L)


def element_log_term(n_elements: int, p: float) -> float:
    """L with 2 e^{-L} = p / n_elements (union bound over all elements)."""
    return math.log(2.0 * max(n_elements, 1) / p)


def element_bounds(cstar: np.ndarray, abssum: np.ndarray, K: int, units: Units,
                   L: float, *, recompute_same_precision: bool = False,
                   deterministic: bool = False) -> np.ndarray:
    """Per-element bound tau_ij on |C_ij - C*_ij| under model (M).

    ``cstar``: the product recomputed in float64; ``abssum``: sum_k |a_ik b_kj|.
    The bound holds with probability >= 1 - 2 e^{-L} per element (in any
    summation order), plus the deterministic output rounding, the float64
    recomputation error, and underflow floors.  ``deterministic=True`` replaces
    the probabilistic accumulation term by the worst case gamma_{K+1} sum|x|
    (Higham, Thm 3.1 for any order), which needs no assumption on the errors.
    """
    cstar = np.abs(np.asarray(cstar, dtype=np.float64))
    abssum = np.asarray(abssum, dtype=np.float64)
    if deterministic:
        ku = (K + 1) * units.acc
        t = (ku / (1.0 - ku) if ku < 1 else np.inf) * abssum
        final = (units.out + units.acc) * (cstar + t) * (1.0 + units.out)
        rec = (1.01 * K * units.recompute * abssum if not recompute_same_precision
               else t)
        return t + rec + final + (K + 1) * units.acc_tiny + units.out_tiny
    growth = 1.0 + min(2.0 * K * units.acc, 1.0)  # computed partial sums may exceed exact ones
    m = 0.5 * (abssum + cstar) * growth
    V = units.acc ** 2 * (K + 3) * m * m / 3.0
    b = units.acc * m
    t = bernstein_t(V, b, L)
    if recompute_same_precision:
        # a float64 product recomputed in float64: the recomputation obeys the
        # same model, so its error gets the same kind of bound
        Vr = units.recompute ** 2 * (K + 3) * m * m / 3.0
        rec = bernstein_t(Vr, units.recompute * m, L)
    else:
        # float64 recomputation of a lower-precision product: gamma_K bound
        rec = 1.01 * K * units.recompute * abssum
    # one rounding into the output format, plus one extra rounding of the
    # accumulator (bias addition / scaling epilogues), of a value within t of C*
    final = (units.out + units.acc) * (cstar + t) * (1.0 + units.out)
    floor = (K + 1) * units.acc_tiny + units.out_tiny
    return t + rec + final + floor


def element_sigma2(cstar: np.ndarray, abssum: np.ndarray, K: int, units: Units) -> np.ndarray:
    """Model variance bound of an element's error (for the row aggregate test)."""
    cstar = np.abs(np.asarray(cstar, dtype=np.float64))
    m = 0.5 * (np.asarray(abssum, dtype=np.float64) + cstar)
    out = (units.out + units.acc) * cstar
    return units.acc ** 2 * (K + 3) * m * m / 3.0 + out * out / 3.0 + (K + 1) * units.acc_tiny ** 2


def row_aggregate_limit(n: int, L: float) -> float:
    """Chi-square tail (Laurent-Massart): sum of n normalised squared errors
    exceeds n + 2 sqrt(n L) + 2 L with probability <= e^{-L}."""
    return n + 2.0 * math.sqrt(n * L) + 2.0 * L


def median_rows(x: np.ndarray) -> np.ndarray:
    """Median along the last axis (the upper one for even lengths) by partition."""
    k = x.shape[-1] // 2
    return np.partition(x, k, axis=-1)[..., k]


def screen_cap(c_norm: np.ndarray, s_norm: np.ndarray, K: int, N: int,
               units: Units, coef: Optional[tuple] = None) -> np.ndarray:
    """Model-based ceiling for the stage-1 noise scale of one matrix.

    ``c_norm``: a typical row norm of C; ``s_norm``: a typical
    sqrt(sum_k a_ik^2 ||b_k||^2) (both from a few sampled rows).  The residual
    d_i collects the product's accumulation errors (sequential order, random
    walk plus drift: u_acc^2 K (||C_i||^2/3 + S_i^2/2) / 3), its output rounding
    (u_out^2 ||C_i||^2 / 3) and the check's own float32 rounding in B r, A y and
    C r (u_check^2 (N S_i^2 + K S_i^2 + N ||C_i||^2) / 6); CAP_SLACK covers
    moderate cancellation.  ``coef``: :func:`screen_cap_coefficients` of (K, N, units),
    where the caller keeps them.
    """
    if not isinstance(c_norm, float):
        c_norm = np.asarray(c_norm, dtype=np.float64)
        s_norm = np.asarray(s_norm, dtype=np.float64)
    alpha, beta = coef if coef is not None else screen_cap_coefficients(K, N, units)
    var = alpha * (c_norm * c_norm) + beta * (s_norm * s_norm)
    return CAP_SLACK * var ** 0.5


def screen_cap_coefficients(K: int, N: int, units: Units) -> tuple:
    """(alpha, beta) with the cap's variance alpha ||C_i||^2 + beta S_i^2 (see
    :func:`screen_cap`)."""
    alpha = units.acc ** 2 * K / 9.0 + units.out ** 2 / 3.0 + units.check ** 2 * N / 6.0
    beta = units.acc ** 2 * K / 6.0 + units.check ** 2 * (N + K) / 6.0
    return alpha, beta


def screen_scale(absd: np.ndarray, c_norm: np.ndarray, s_norm: np.ndarray, K: int, N: int,
                 units: Units):
    """Calibrated stage-1 noise scale per matrix.

    ``absd``: |d| of shape (items, M * rounds); ``c_norm``, ``s_norm``: row
    scales per item (see :func:`screen_cap`).  Returns (scale, cap, calibrated),
    one entry per item.  The scale is the median of |d| (and, with enough rows,
    its 90th percentile) converted to a standard deviation and clipped to
    [FLOOR_FRACTION * cap, cap]; with too few rows per item the items are
    pooled, and with too few rows overall the cap alone is used.
    """
    items, rows = absd.shape
    cap = screen_cap(c_norm, s_norm, K, N, units)
    if rows == 0:
        return np.zeros(items), cap, False
    if rows >= MIN_CALIBRATION_ROWS:
        k = rows // 2
        if rows >= TAIL_CALIBRATION_ROWS:
            # honest residuals can be heavier-tailed than Gaussian (e.g. few-bit
            # operands whose partial sums are often exact): use the 90th
            # percentile too, which a few corrupted rows cannot move
            k9 = int(0.9 * rows)
            part = np.partition(absd, (k, k9), axis=-1)
            med_d = np.maximum(part[..., k], part[..., k9] * (MEDIAN_ABS_NORMAL / Q90_ABS_NORMAL))
        else:
            med_d = np.partition(absd, k, axis=-1)[..., k]
    elif items * rows >= MIN_CALIBRATION_ROWS:
        med_d = np.full(items, median_rows(absd.reshape(1, -1))[0])
    else:
        return cap, cap, False
    scale = med_d / MEDIAN_ABS_NORMAL
    scale = np.clip(scale, FLOOR_FRACTION * cap, cap)
    return scale, cap, True


def screen_scale_one(absd: np.ndarray, c_norm: float, s_norm: float, K: int, N: int,
                     units: Units):
    """:func:`screen_scale` for a single matrix (``absd`` 1-D), in floats:
    the same quantiles and clipping, without per-item arrays."""
    return screen_scale_max(absd, c_norm, s_norm, K, N, units)[:3]


def screen_scale_max(absd: np.ndarray, c_norm: float, s_norm: float, K: int, N: int,
                     units: Units):
    """:func:`screen_scale_one` and max |d| (NaN where ``absd`` holds one) from the same
    partition: (scale, cap, calibrated, dmax)."""
    rows = absd.shape[0]
    cap = screen_cap(float(c_norm), float(s_norm), K, N, units)
    if rows < MIN_CALIBRATION_ROWS:
        return cap, cap, False, float(absd.max())
    k = rows // 2
    if rows >= TAIL_CALIBRATION_ROWS:
        k9 = int(0.9 * rows)
        part = np.partition(absd, (k, k9, rows - 1))
        med_d = max(float(part[k]), float(part[k9]) * (MEDIAN_ABS_NORMAL / Q90_ABS_NORMAL))
    else:
        part = np.partition(absd, (k, rows - 1))
        med_d = float(part[k])
    scale = min(max(med_d / MEDIAN_ABS_NORMAL, FLOOR_FRACTION * cap), cap)
    return scale, cap, True, float(part[rows - 1])
