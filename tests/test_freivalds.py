"""Tests of kcontract.freivalds.verify: correctness, detection, localisation,
repair, batching, the rounding-error model and every bad-input outcome."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from kcontract.errors import UsageError
from kcontract.formats import round_to
from kcontract.freivalds import (FreivaldsResult, NonFiniteOperandError, check_product,
                                 verify)
from kcontract.freivalds import _model as model

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
E5M2 = ml_dtypes.float8_e5m2


def rand(shape, dtype=np.float32, seed=0, kind="normal"):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        x = rng.standard_normal(shape)
    elif kind == "uniform":
        x = rng.uniform(-1, 1, shape)
    else:
        x = rng.uniform(0, 1, shape)
    return x.astype(dtype)


def pair(m=96, k=80, n=72, dtype=np.float32, seed=0, kind="normal"):
    return rand((m, k), dtype, seed, kind), rand((k, n), dtype, seed + 1, kind)


# ---------------------------------------------------------------------------
# honest products pass, in any summation order
# ---------------------------------------------------------------------------

def _orders(A, B):
    """The same fp32 product computed in several summation orders."""
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    K = A.shape[1]
    seq = np.zeros((A.shape[0], B.shape[1]), np.float32)
    for k in range(K):  # sequential rank-1 updates, each rounded to fp32
        seq += np.outer(A[:, k], B[k, :]).astype(np.float32)
    rev = np.zeros_like(seq)
    for k in reversed(range(K)):
        rev += np.outer(A[:, k], B[k, :]).astype(np.float32)
    blocked = np.zeros_like(seq)
    for s in range(0, K, 16):
        blocked += A[:, s:s + 16] @ B[s:s + 16, :]
    parts = [np.outer(A[:, k], B[k, :]).astype(np.float32) for k in range(K)]
    while len(parts) > 1:  # pairwise
        parts = [parts[i] + parts[i + 1] if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return {"blas": A @ B, "exact-rounded": (A64 @ B64).astype(np.float32),
            "sequential": seq, "reversed": rev, "blocked16": blocked, "pairwise": parts[0]}


@pytest.mark.parametrize("kind", ["normal", "uniform", "positive"])
def test_honest_fp32_any_order_passes(kind):
    A, B = pair(120, 200, 64, seed=3, kind=kind)
    for name, C in _orders(A, B).items():
        res = verify(A, B, C, seed=11)
        assert res.passed, (kind, name, res.message, res.ratio)
        assert res.reason == "verified"
        assert res.ratio <= 1.0


@pytest.mark.parametrize("dt", [np.float64, np.float16, BF16, E4M3, E5M2])
def test_honest_low_precision_operands_pass(dt):
    A, B = pair(128, 96, 80, dtype=dt, seed=5)
    C32 = A.astype(np.float32) @ B.astype(np.float32)
    outs = [C32, C32.astype(dt)] if dt is not np.float64 else \
        [A.astype(np.float64) @ B.astype(np.float64)]
    for C in outs:
        with np.errstate(over="ignore", invalid="ignore"):
            res = verify(A, B, C)
        assert res.passed, (dt, C.dtype, res.message)
        assert res.operand_format == np.dtype(dt).name
        assert res.check_precision in ("float32", "float64")


def test_honest_passes_many_seeds():
    A, B = pair(200, 300, 150, seed=7)
    C = A @ B
    assert all(verify(A, B, C, seed=s).passed for s in range(30))


def test_rounds_and_seed_reproducible():
    A, B = pair(seed=8)
    C = A @ B
    r1, r2 = verify(A, B, C, seed=42, rounds=3), verify(A, B, C, seed=42, rounds=3)
    assert r1.passed and r1.rounds == 3
    assert r1.screen_ratio == r2.screen_ratio
    assert np.array_equal(r1.threshold, r2.threshold)
    r3 = verify(A, B, C)
    assert isinstance(r3.seed, int) and r3.seed >= 0


# ---------------------------------------------------------------------------
# detection, localisation, repair
# ---------------------------------------------------------------------------

def test_single_corruption_detected_located_repaired():
    A, B = pair(256, 256, 256, seed=1)
    C = A @ B
    C2 = C.copy()
    C2[17, 203] += np.float32(1e-4 * np.abs(C).max())
    res = verify(A, B, C2, seed=3, repair=True)
    assert not res.passed and res.reason == "corrupted"
    assert res.suspect_elements == [(17, 203)]
    assert res.suspect_rows == [(17,)]
    assert res.ratio > 1 and res.screen_ratio > 1
    s = res.suspects[0]
    exact = float(A[17].astype(np.float64) @ B[:, 203].astype(np.float64))
    assert s.expected == pytest.approx(exact, rel=1e-12)
    assert abs(s.error) > s.bound
    rep = res.repaired
    assert rep is not C2 and rep[17, 203] == np.float32(exact)
    assert np.array_equal(np.delete(rep.ravel(), 17 * 256 + 203),
                          np.delete(C2.ravel(), 17 * 256 + 203))
    assert verify(A, B, rep, seed=3).passed
    # in place
    res = verify(A, B, C2, seed=3, repair="inplace")
    assert res.repaired is C2 and C2[17, 203] == np.float32(exact)


def test_small_perturbation_within_rounding_is_accepted():
    A, B = pair(128, 128, 128, seed=2)
    C = A @ B
    C2 = C.copy()
    C2[5, 5] = np.nextafter(C2[5, 5], np.float32(np.inf))  # one ulp: honest-looking
    assert verify(A, B, C2).passed


def test_several_corruptions_in_several_rows():
    A, B = pair(200, 160, 180, seed=4)
    C = A @ B
    bad = [(3, 7), (50, 100), (51, 0), (199, 179)]
    for i, j in bad:
        C[i, j] += 0.05 * np.abs(C).max()
    res = verify(A, B, C)
    assert not res.passed
    assert sorted(res.suspect_elements) == sorted(bad)


def test_whole_row_corruption_found():
    A, B = pair(100, 90, 80, seed=5)
    C = A @ B
    C[42] *= 1.01
    res = verify(A, B, C, repair=True)
    assert not res.passed
    assert (42,) in res.suspect_rows
    assert {j for (i, j) in res.suspect_elements if i == 42} == set(range(80)) or \
        (42,) in res.row_failures
    assert verify(A, B, res.repaired).passed


@pytest.mark.parametrize("seed", range(6))
def test_corrupted_column_localised_by_left_projection(seed):
    A, B = pair(300, 64, 100, seed=6)
    C = A @ B
    C[:, 37] += np.float32(0.2)  # every row: more screened rows than max_rows
    res = verify(A, B, C, max_rows=8, seed=seed)
    assert not res.passed
    assert res.unexamined_rows > 0
    assert (37,) in res.suspect_columns
    assert {j for (_, j) in res.suspect_elements} == {37}
    assert len(res.suspect_elements) == 300


@pytest.mark.parametrize("localize", [True, False])
def test_screened_rows_left_unrecomputed_are_still_checked(localize):
    """No row recomputed (max_rows=0) though the screen flagged some: they are checked
    through the left projection's suspect columns (with or without localize), so a wrong
    element there still fails the product, and an honest product passes."""
    A, B = pair(300, 64, 100, seed=3)
    C = A @ B
    bad = C.copy()
    bad[:40, 11] += np.float32(0.05)  # 40 rows screened, all in one column
    for seed in range(4):
        res = verify(A, B, bad, max_rows=0, seed=seed, localize=localize)
        assert not res.passed and res.unexamined_rows >= 39
        assert {j for (_, j) in res.suspect_elements} == {11}
        assert verify(A, B, C, max_rows=0, seed=seed, localize=localize).passed


def test_constant_row_offset_never_cancels():
    """A whole row shifted by a constant: sum_j r_j e must not vanish."""
    from kcontract.freivalds._core import rademacher
    for s in range(200):
        r = rademacher(s, 0, 64)
        assert abs(int(r.sum())) >= 2
    A, B = pair(100, 50, 64, seed=8)
    C = A @ B
    C[7] += np.float32(0.05)
    for s in range(20):
        res = verify(A, B, C, seed=s)
        assert (7,) in res.suspect_rows


def test_lower_precision_accumulation_is_flagged():
    """A product that silently ran with float16 accumulation (or TF32 inputs)
    is not an honest float32-accumulated product."""
    A, B = pair(96, 512, 64, seed=9)
    acc = np.zeros((96, 64), np.float16)
    for k in range(512):
        acc = (acc + np.outer(A[:, k], B[k, :]).astype(np.float16)).astype(np.float16)
    with np.errstate(over="ignore"):
        res = verify(A, B, acc.astype(np.float32), accumulate="float32")
    assert not res.passed
    assert verify(A, B, acc.astype(np.float32), accumulate="float16",
                  output_format="float16").passed
    tf = round_to(A, "tfloat32").astype(np.float32) @ round_to(B, "tfloat32").astype(np.float32)
    assert not verify(A, B, tf).passed


def test_bias():
    A, B = pair(64, 48, 40, seed=10)
    bias = rand((40,), seed=11)
    C = A @ B + bias
    assert verify(A, B, C, bias=bias).passed
    assert not verify(A, B, C).passed
    C[3, 4] += 1.0
    res = verify(A, B, C, bias=bias)
    assert res.suspect_elements == [(3, 4)]


# ---------------------------------------------------------------------------
# batched inputs
# ---------------------------------------------------------------------------

def test_batched_broadcast_and_localisation():
    A = rand((4, 3, 64, 80), seed=1)
    B = rand((3, 80, 50), seed=2)
    C = A @ B
    res = verify(A, B, C)
    assert res.passed and res.threshold.shape == (4, 3)
    C[2, 1, 10, 20] += 1.0
    C[0, 2, 63, 0] -= 1.0
    res = verify(A, B, C, repair=True)
    assert not res.passed
    assert sorted(res.suspect_elements) == [(0, 2, 63, 0), (2, 1, 10, 20)]
    assert sorted(res.suspect_rows) == [(0, 2, 63), (2, 1, 10)]
    assert verify(A, B, res.repaired).passed


def test_batched_left_operand_2d():
    A = rand((30, 40), seed=3)
    B = rand((5, 40, 20), seed=4)
    C = A @ B
    assert verify(A, B, C).passed
    C[4, 29, 19] += 1.0
    assert verify(A, B, C).suspect_elements == [(4, 29, 19)]


def test_batched_small_matrices_pool_calibration():
    A = rand((64, 4, 16), seed=5)
    B = rand((64, 16, 8), seed=6)
    C = A @ B
    res = verify(A, B, C)
    assert res.passed and res.calibrated
    C[33, 2, 7] += 0.5
    assert verify(A, B, C).suspect_elements == [(33, 2, 7)]


def test_tiny_matrix_uses_model_cap():
    A, B = pair(3, 5, 4, seed=7)
    C = A @ B
    res = verify(A, B, C)
    assert res.passed and not res.calibrated
    C[1, 2] += 0.1
    assert verify(A, B, C).suspect_elements == [(1, 2)]


# ---------------------------------------------------------------------------
# bad input: each case has a defined outcome
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,c,msg", [
    ((4, 5), (6, 3), (4, 3), "inner dimensions"),
    ((2, 4, 5), (3, 5, 3), (2, 4, 3), "do not broadcast"),
    ((4, 5), (5, 3), (4, 4), "c has shape"),
    ((4, 5), (5, 3), (2, 4, 3), "c has shape"),
    ((5,), (5, 3), (3,), "at least 2 dimensions"),
])
def test_shape_errors(a, b, c, msg):
    with pytest.raises(UsageError, match=msg):
        verify(np.zeros(a, np.float32), np.zeros(b, np.float32), np.zeros(c, np.float32))


def test_dtype_errors():
    A, B = pair(4, 5, 3)
    C = A @ B
    with pytest.raises(UsageError, match="dtype mismatch"):
        verify(A, B.astype(np.float64), C)
    for bad in (np.int32, np.complex64, np.bool_):
        with pytest.raises(UsageError, match="unsupported dtype"):
            verify(A.astype(bad), B.astype(bad), C)
    with pytest.raises(UsageError, match="unsupported dtype"):
        verify(A, B, C.astype(np.int64))
    with pytest.raises(UsageError, match="unknown format"):
        verify(A, B, C, accumulate="float13")


def test_option_errors():
    A, B = pair(4, 5, 3)
    C = A @ B
    for kw in ({"rounds": 0}, {"rounds": 1.5}, {"false_alarm": 0.0}, {"false_alarm": 1.0},
               {"false_alarm": "often"}, {"groups": 0}, {"bound": "tight"},
               {"repair": "yes"}, {"seed": -1}, {"seed": "x"}):
        with pytest.raises(UsageError):
            verify(A, B, C, **kw)
    with pytest.raises(UsageError, match="bias"):
        verify(A, B, C, bias=np.zeros(4, np.float32))


def test_empty_products():
    z = np.zeros
    res = verify(z((0, 5), np.float32), z((5, 3), np.float32), z((0, 3), np.float32))
    assert res.passed and res.reason == "empty"
    res = verify(z((4, 5), np.float32), z((5, 0), np.float32), z((4, 0), np.float32))
    assert res.passed and res.reason == "empty"
    res = verify(z((0, 4, 5), np.float32), z((5, 3), np.float32), z((0, 4, 3), np.float32))
    assert res.passed and res.reason == "empty"
    # K = 0: the product is exactly zero
    res = verify(z((4, 0), np.float32), z((0, 3), np.float32), z((4, 3), np.float32))
    assert res.passed
    C = z((4, 3), np.float32)
    C[2, 1] = 1.0
    res = verify(z((4, 0), np.float32), z((0, 3), np.float32), C, repair=True)
    assert not res.passed and res.reason == "empty-sum"
    assert res.suspect_elements == [(2, 1)] and res.repaired[2, 1] == 0
    bias = np.array([1.0, 2.0, 3.0], np.float32)
    assert verify(z((4, 0), np.float32), z((0, 3), np.float32), np.tile(bias, (4, 1)),
                  bias=bias).passed


def test_nonfinite_operands_raise():
    A, B = pair(20, 30, 10)
    C = A @ B
    A2 = A.copy()
    A2[3, 4] = np.nan
    with pytest.raises(NonFiniteOperandError, match=r"operand a .*\(3, 4\)"):
        verify(A2, B, C)
    B2 = B.copy()
    B2[0, 9] = np.inf
    with pytest.raises(NonFiniteOperandError, match="operand b"):
        verify(A, B2, C)
    assert issubclass(NonFiniteOperandError, UsageError)
    with pytest.raises(NonFiniteOperandError):
        verify(A, B, C, bias=np.full(10, np.nan, np.float32))


def test_nonfinite_result():
    A, B = pair(40, 30, 20)
    C = A @ B
    C[7, 3] = np.nan
    C[9, 0] = np.inf
    res = verify(A, B, C, repair=True)
    assert not res.passed and res.reason == "nonfinite"
    assert sorted(res.suspect_elements) == [(7, 3), (9, 0)]
    assert np.isfinite(res.repaired).all()
    assert verify(A, B, res.repaired).passed


def test_honest_overflow_to_inf_passes():
    A = np.full((8, 16), 200.0, np.float16)
    B = np.full((16, 8), 200.0, np.float16)
    B[:, 0] = 1.0
    with np.errstate(over="ignore"):
        C = (A.astype(np.float32) @ B.astype(np.float32)).astype(np.float16)  # 640000 -> inf
    assert np.isinf(C[:, 1:]).all() and np.isfinite(C[:, 0]).all()
    assert verify(A, B, C).passed
    C2 = C.copy()
    C2[0, 0] = np.inf  # 3200 does not overflow float16: a fault
    res = verify(A, B, C2)
    assert not res.passed and res.suspect_elements == [(0, 0)]


def test_float32_check_overflow_falls_back_to_float64():
    A = np.zeros((70, 4), np.float32)
    A[:, 0] = 1.0
    B = np.zeros((4, 70), np.float32)
    B[0] = 3e38  # B r overflows float32; C = A B does not
    C = A @ B
    assert np.isfinite(C).all()
    res = verify(A, B, C)
    assert res.passed and res.check_precision == "float64"


def test_mixed_kinds_rejected():
    torch = pytest.importorskip("torch")
    A, B = pair(4, 5, 3)
    with pytest.raises(UsageError, match="all numpy arrays or all torch"):
        verify(torch.from_numpy(A), B, A @ B)


# ---------------------------------------------------------------------------
# result object, contract entry point, model
# ---------------------------------------------------------------------------

def test_result_fields_and_json():
    A, B = pair(64, 32, 48, seed=2)
    C = A @ B
    C[1, 1] += 5
    res = verify(A, B, C, false_alarm=1e-6)
    assert isinstance(res, FreivaldsResult) and not res
    assert res.false_alarm == 1e-6
    d = json.loads(json.dumps(res.to_dict()))
    assert d["passed"] is False and d["suspects"][0]["index"] == [1, 1]
    assert d["shape"] == {"batch": [], "M": 64, "K": 32, "N": 48}
    assert d["threshold"]["min"] > 0


def test_check_product_for_contracts():
    A, B = pair(80, 64, 40, dtype=BF16, seed=3)
    C = (A.astype(np.float32) @ B.astype(np.float32)).astype(BF16)
    res = check_product(A.astype(np.float64), B.astype(np.float64), C.astype(np.float64),
                        accumulate="float32", output_format="bfloat16")
    assert res.passed and res.output_format == "bfloat16" and res.accumulate == "float32"
    C64 = C.astype(np.float64)
    C64[2, 2] *= 1.5
    res = check_product(A.astype(np.float64), B.astype(np.float64), C64,
                        accumulate="float32", output_format="bfloat16")
    assert not res.passed and res.suspect_elements == [(2, 2)]


def test_element_bound_holds_for_sequential_sums():
    """The per-element bound covers fp32 dot products summed in random orders."""
    rng = np.random.default_rng(0)
    K = 2048
    units = model.Units(acc=2.0 ** -24, out=2.0 ** -24, check=2.0 ** -24, recompute=2.0 ** -53,
                        acc_tiny=0.0, out_tiny=0.0)
    worst = 0.0
    for t in range(20):
        x = rng.standard_normal(K).astype(np.float32) * rng.standard_normal(K).astype(np.float32)
        if t % 2:
            x = np.abs(x)
        x = x[rng.permutation(K)]
        s = np.float32(0)
        for v in x:
            s = np.float32(s + v)
        exact = float(np.sum(x.astype(np.float64)))
        bound = model.element_bounds(np.array([exact]), np.array([np.abs(x).sum(dtype=np.float64)]),
                                     K, units, model.element_log_term(1, 1e-9))[0]
        worst = max(worst, abs(float(s) - exact) / bound)
    assert worst < 0.5


def test_bernstein_t():
    assert model.bernstein_t(np.array(1.0), np.array(0.0), 2.0) == pytest.approx(2.0)
    t = model.bernstein_t(np.array(4.0), np.array(1.0), 10.0)
    assert 2 * np.exp(-t * t / (2 * 4.0 + 2 * 1.0 * t / 3)) == pytest.approx(2 * np.exp(-10.0))


def test_import_does_not_import_torch():
    code = ("import sys, kcontract.freivalds; import numpy as np; "
            "from kcontract.freivalds import verify; "
            "a = np.ones((3, 3), np.float32); assert verify(a, a, a @ a).passed; "
            "assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_works_without_torch_installed():
    code = ("import sys; sys.modules['torch'] = None; import numpy as np; "
            "from kcontract.freivalds import verify; "
            "a = np.ones((5, 5), np.float32); assert verify(a, a, a @ a).passed")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_groups_blocked_check():
    """Column groups: same verdicts, a quieter screen for low-precision outputs."""
    A, B = pair(256, 256, 256, dtype=BF16, seed=12)
    C = (A.astype(np.float32) @ B.astype(np.float32)).astype(BF16)
    res = verify(A, B, C, groups=16)
    assert res.passed and res.groups == 16
    C2 = C.copy()
    C2[100, 200] = C2[100, 200].astype(np.float32) + np.float32(0.02 * np.abs(
        C.astype(np.float32)).max())
    r1, r16 = verify(A, B, C2, seed=5), verify(A, B, C2, seed=5, groups=16)
    assert r16.suspect_elements == [(100, 200)]
    assert r16.screen_ratio > 2 * r1.screen_ratio
    # batched, with bias, and more groups than columns
    A3, B3 = rand((3, 20, 30), seed=13), rand((30, 12), seed=14)
    bias = rand((12,), seed=15)
    C3 = A3 @ B3 + bias
    assert verify(A3, B3, C3, bias=bias, groups=4).passed
    assert verify(A3, B3, C3, bias=bias, groups=100).groups == 12
    C3[1, 5, 7] += 1
    assert verify(A3, B3, C3, bias=bias, groups=4).suspect_elements == [(1, 5, 7)]
    with pytest.raises(UsageError):
        verify(A3, B3, C3, groups=0)


def test_constant_data_sequential_and_deterministic_bound():
    """Long sequential sums of identical values break the mean-zero assumption
    (a documented limitation); bound="deterministic" needs no such assumption."""
    a = np.full((8, 1024), 0.1, np.float32)
    b = np.full((1024, 8), 0.1, np.float32)
    seq = np.zeros((8, 8), np.float32)
    for k in range(1024):
        seq += np.multiply.outer(a[:, k], b[k])
    assert verify(a, b, a @ b).passed  # blocked BLAS sums pass
    res = verify(a, b, seq, bound="deterministic")
    assert res.passed and res.false_alarm == 0.0 and res.bound == "deterministic"
    bad = seq.copy()
    bad[3, 3] *= 1.01
    assert verify(a, b, bad, bound="deterministic").suspect_elements == [(3, 3)]
    with pytest.raises(UsageError):
        verify(a, b, seq, bound="tight")


def _masked_attention(seed, T=256, D=64):
    """softmax(L) V with a causal mask: row i averages i + 1 rows of V, so the
    rows' rounding noise differs by an order of magnitude."""
    rng = np.random.default_rng(seed)
    L = rng.standard_normal((T, T)).astype(np.float32) * 2
    L[np.triu_indices(T, 1)] = -np.inf
    P = np.exp(L - L.max(1, keepdims=True))
    P = (P / P.sum(1, keepdims=True)).astype(np.float32)
    V = rng.standard_normal((T, D)).astype(np.float32)
    return P, V, P @ V


def test_per_row_noise_clears_heterogeneous_honest_rows(monkeypatch):
    from kcontract.freivalds import _screen

    with_relief = without = 0
    for seed in range(20):
        P, V, C = _masked_attention(seed)
        res = verify(P, V, C, seed=seed)
        assert res.passed, res.message
        with_relief += len(res.screened_rows)
        monkeypatch.setattr(_screen, "ROW_RELIEF_MIN", math.inf)
        without += len(verify(P, V, C, seed=seed).screened_rows)
        monkeypatch.undo()
    # the median-calibrated screen sends the noisy early rows to stage 2; judged
    # against their own model noise they are cleared
    assert without > 0 and with_relief < without


def test_per_row_noise_keeps_faults_caught():
    for seed in range(10):
        P, V, C = _masked_attention(seed)
        C = C.copy()
        rng = np.random.default_rng(100 + seed)
        i, j = int(rng.integers(256)), int(rng.integers(64))
        C[i, j] += 1e-4 * np.abs(C).max()
        res = verify(P, V, C, seed=seed)
        assert not res.passed and res.suspects[0].index == (i, j)


def test_per_row_noise_leaves_homogeneous_rows_alone():
    from kcontract.freivalds import _core, _screen

    rng = np.random.default_rng(5)
    A = rng.standard_normal((256, 256)).astype(np.float32)
    B = rng.standard_normal((256, 256)).astype(np.float32)
    p = _core._problem(A, B, A @ B, None, None)
    ratios = np.full((1, 256), 2.0)
    assert _screen.row_relief(p, ratios, _core._units(p)) is ratios  # rho < 1.5 everywhere


@pytest.mark.parametrize("seed", [-1, 2 ** 128, 1.5, "7"])
def test_a_seed_outside_two_64_bit_words_is_a_usage_error(seed):
    A, B = pair(80, 64, 70, seed=1)
    with pytest.raises(UsageError, match=r"seed must be an integer in \[0, 2\*\*128\)"):
        verify(A, B, A @ B, seed=seed)


def test_the_largest_seed_is_taken():
    A, B = pair(80, 64, 70, seed=1)
    res = verify(A, B, A @ B, seed=2 ** 128 - 1)
    assert res.passed and res.seed == 2 ** 128 - 1


@pytest.mark.parametrize("N", [2, 4, 8, 15])
def test_a_narrow_product_has_a_residual_per_column_so_no_row_fault_cancels(N):
    """Below 16 columns: a whole row offset by a constant, or two elements of a row off by
    the same amount, would cancel under about half of all sign vectors in one residual;
    with one residual per column they are caught under every seed."""
    A, B = pair(200, 96, N, seed=N)
    C = A @ B
    offset, pair_off = C.copy(), C.copy()
    offset[7] += np.float32(0.05 * np.abs(C).max())
    pair_off[9, :2] += np.float32(1.0)
    for seed in range(16):
        assert verify(A, B, C, seed=seed).passed
        for bad in (offset, pair_off):
            res = verify(A, B, bad, seed=seed)
            assert not res.passed and res.groups == N
    assert verify(A, B, C).groups == N and verify(A, B, C, groups=2).groups == 2
