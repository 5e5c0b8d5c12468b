"""Tests of the Freivalds check's stage 1 (kcontract.freivalds._screen): the
signs, the widening of narrow formats, the row scales of the screen, and the
detection / false-alarm figures the fast path must keep."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from kcontract.freivalds import verify
from kcontract.freivalds._backend import NUMPY_OPS, _Widener
from kcontract.freivalds._core import _problem
from kcontract.freivalds._screen import b_rms, row_scales, sample_rows, signs


def _mix(x):
    m = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def _reference_signs(seed, stream, n):
    """The documented definition, one bit at a time: word j of attempt a is
    mix(key + j * 0x9E3779B97F4A7C15), key = mix(mix(seed mod 2^64) ^ (seed >> 64) ^
    mix(stream * 256 + a)); bits most significant first, 1 -> -1; redrawn while
    |sum| < sqrt(n)/4."""
    m = (1 << 64) - 1
    for attempt in range(64):
        key = _mix(_mix(seed & m) ^ (seed >> 64) ^ _mix(stream * 256 + attempt))
        r = []
        for i in range(n):
            word = _mix((key + (i // 64) * 0x9E3779B97F4A7C15) & m)
            r.append(-1 if (word >> (63 - i % 64)) & 1 else 1)
        r = np.array(r)
        if n < 16 or abs(int(r.sum())) >= 0.25 * math.sqrt(n):
            return r
    return r


@pytest.mark.parametrize("n", [1, 7, 16, 63, 64, 1000, 4097])
def test_signs_match_the_documented_definition(n):
    for seed in list(range(40)) + [2 ** 63 + 5, 2 ** 100 + 7]:
        ref = _reference_signs(seed, 3, n)
        for dt in (np.int8, np.float32, np.float64):
            r = signs(seed, 3, n, dt)
            assert r.dtype == np.dtype(dt) and r.shape == (n,) and r.flags.c_contiguous
            assert np.array_equal(r.astype(np.int64), ref)
        if n >= 16:
            assert abs(int(ref.sum())) >= 0.25 * math.sqrt(n)


def test_bfloat16_widening_is_exact():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((37, 53)) * 10.0 ** rng.integers(-30, 30, (37, 53)))
    x = x.astype(ml_dtypes.bfloat16)
    x[0, :4] = [np.inf, -np.inf, 0.0, -0.0]
    w = _Widener(x.dtype, np.float32, 37, 53)
    got = w(x)
    assert got.dtype == np.float32
    assert np.array_equal(got, x.astype(np.float32), equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(x.astype(np.float32)))
    # a non-contiguous chunk (columns of a transposed matrix) widens the same way
    xt = x.T[:20]
    assert np.array_equal(_Widener(x.dtype, np.float32, 20, 37)(xt), xt.astype(np.float32))


def test_bfloat16_stage1_equals_float32_check_of_the_same_values():
    """The 16-bit operands' projections are the float32 check's of the same values, up to
    float32 rounding (the 16-bit product may sum in another order), and both checks
    calibrate the same noise."""
    rng = np.random.default_rng(1)
    A = rng.standard_normal((300, 200)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((200, 150)).astype(ml_dtypes.bfloat16)
    C = (A.astype(np.float32) @ B.astype(np.float32)).astype(np.float32)
    A32, B32 = A.astype(np.float32), B.astype(np.float32)
    r1 = verify(A, B, C, seed=5)
    r2 = verify(A32, B32, C, seed=5, accumulate="float32", output_format="float32")
    assert r1.passed and r2.passed
    assert 0.7 < float(r1.threshold) / float(r2.threshold) < 1.4
    p16, p32 = _problem(A, B, C, None, None), _problem(A32, B32, C, None, None)
    r = signs(5, 0, 150, np.float32)
    y16, y32 = NUMPY_OPS.matvec(B, r, np.float32), B32 @ r
    y64 = B32.astype(np.float64) @ r
    gamma = 2 * 200 * 2.0 ** -24 * (np.abs(B32).astype(np.float64) @ np.abs(r))
    assert np.all(np.abs(y16 - y64) <= gamma) and np.all(np.abs(y32 - y64) <= gamma)
    z16 = NUMPY_OPS.matvec(p16.a, y32, np.float32)
    z64 = A32.astype(np.float64) @ y32.astype(np.float64)
    gz = 2 * 200 * 2.0 ** -24 * (np.abs(A32).astype(np.float64) @ np.abs(y32))
    assert np.all(np.abs(z16 - z64) <= gz)
    assert p32.a.dtype == np.float32


def test_sample_rows_distinct_sorted_and_seeded():
    for seed in range(50):
        rows = sample_rows(seed, 10, 4)
        assert len(set(rows.tolist())) == 4 and list(rows) == sorted(rows)
        assert rows.min() >= 0 and rows.max() < 10
        assert np.array_equal(rows, sample_rows(seed, 10, 4))


def test_b_rms_from_y_matches_frobenius_norm():
    """E (B r)_k^2 = ||B_k||^2 for +-1 signs: ||B r|| / sqrt(K) estimates rms ||B_k||
    within a few sqrt(2/K) (no second pass over B)."""
    rng = np.random.default_rng(2)
    K, N = 2048, 512
    B = (rng.standard_normal((K, N)) * rng.uniform(0.1, 3.0, (K, 1))).astype(np.float32)
    A = rng.standard_normal((8, K)).astype(np.float32)
    p = _problem(A, B, A @ B, None, None)
    exact = float(np.linalg.norm(B.astype(np.float64)) / math.sqrt(K))
    for seed in range(5):
        y = B @ signs(seed, 0, N, np.float32)
        assert b_rms(p, seed, y) == pytest.approx(exact, rel=6 * math.sqrt(2 / K))


def test_row_scales_follow_the_rows():
    """The screen's typical ||C_i|| comes from the rows of C (RMS over a block
    of rows, or the largest row of a small product)."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((400, 128)).astype(np.float32)
    B = rng.standard_normal((128, 96)).astype(np.float32)
    C = A @ B
    p = _problem(A, B, C, None, None)
    cn, sn = row_scales(p, 7, 1)
    norms = np.linalg.norm(C.astype(np.float64), axis=1)
    assert norms.min() <= cn <= norms.max()
    assert 0.5 < sn / np.median(norms) < 2.0  # random data: S_i ~ ||C_i||
    small = _problem(A[:10], B, C[:10], None, None)
    cn, _ = row_scales(small, 7, 1)
    assert cn == pytest.approx(norms[:10].max(), rel=1e-6)


@pytest.mark.parametrize("n", [2048])
def test_single_element_fault_caught_every_time(n):
    """One element off by 1e-4 max|C| is caught (and localised) on every trial."""
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n), dtype=np.float32)
    B = rng.standard_normal((n, n), dtype=np.float32)
    C = A @ B
    e = np.float32(1e-4 * float(np.abs(C).max()))
    for t in range(6):
        i, j = (int(v) for v in rng.integers(0, n, 2))
        old = C[i, j]
        C[i, j] = old + (e if t % 2 else -e)
        res = verify(A, B, C, seed=100 + t)
        C[i, j] = old
        assert not res.passed and res.suspect_elements == [(i, j)], (t, res.message)
        assert verify(A, B, C, seed=200 + t).passed


def test_honest_products_pass_across_seeds_and_shapes():
    rng = np.random.default_rng(4)
    for M, K, N in [(512, 512, 512), (1, 1024, 768), (128, 640, 900), (70, 33, 65)]:
        A = rng.standard_normal((M, K), dtype=np.float32)
        B = rng.uniform(0, 1, (K, N)).astype(np.float32)
        C = A @ B
        for s in range(15):
            res = verify(A, B, C, seed=s)
            assert res.passed, (M, K, N, s, res.message)


def _general(monkeypatch, *args, **kw):
    """verify through the general path only (the common-call shortcut switched off)."""
    from kcontract.freivalds import _core
    with monkeypatch.context() as m:
        m.setattr(_core, "_fast", lambda *a, **k: None)
        return verify(*args, **kw)


_BF = np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("dtype,out", [(np.float32, None), (np.float64, None),
                                       (_BF, None), (_BF, np.float32),
                                       (np.float16, None), (np.float16, np.float32)])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_the_common_call_shortcut_decides_exactly_as_the_general_path(monkeypatch, dtype,
                                                                      out, backend):
    from kcontract.freivalds import _core, _mkl
    if np.dtype(dtype).itemsize == 2 and not _mkl.available(dtype):
        pytest.skip("16-bit operands take the shortcut only with MKL's product")
    rng = np.random.default_rng(7)
    calls = []  # the shortcuts' results: the compiled common call's, or _fast's
    for name in ("_fast", "_common"):
        real = getattr(_core, name)
        monkeypatch.setattr(_core, name, lambda *a, real=real, **k: calls.append(
            real(*a, **k)) or calls[-1])
    for M, K, N in ((256, 300, 200), (65, 64, 64), (512, 97, 130)):
        A = rng.standard_normal((M, K)).astype(dtype)
        B = rng.standard_normal((K, N)).astype(dtype)
        C = (A.astype(np.float64) @ B.astype(np.float64)).astype(out or dtype)
        if backend == "torch":
            torch = pytest.importorskip("torch")

            def tensor(x):
                if x.dtype == _BF:
                    return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)
                return torch.from_numpy(x)
            A, B, C = (tensor(x) for x in (A, B, C))
        for seed in (0, 1, 12345):
            fast = verify(A, B, C, seed=seed)
            slow = _general(monkeypatch, A, B, C, seed=seed)
            assert fast.passed and slow.passed and fast.backend == slow.backend == backend
            assert (fast.ratio, fast.screen_ratio, fast.calibrated, fast.seed) == (
                slow.ratio, slow.screen_ratio, slow.calibrated, slow.seed)
            assert float(fast.threshold) == float(slow.threshold)
            assert float(fast.noise_scale) == float(slow.noise_scale)
            assert fast.to_dict().keys() == slow.to_dict().keys()
            assert {k: v for k, v in fast.to_dict().items() if k != "seconds"} == \
                {k: v for k, v in slow.to_dict().items() if k != "seconds"}
    assert any(c is not None for c in calls)  # the shortcut was taken


def test_a_fault_leaves_the_shortcut_for_the_general_path(monkeypatch):
    """A screened row hands the shortcut's screen to the general path, which decides from
    it exactly as from its own stage 1 (every field of the verdict, the faults located
    beyond max_rows included)."""
    from kcontract.freivalds import _core
    rng = np.random.default_rng(3)
    A = rng.standard_normal((300, 200)).astype(np.float32)
    B = rng.standard_normal((200, 250)).astype(np.float32)
    C = A @ B
    C[17, 33] += 1e-3 * float(np.abs(C).max())
    scr = _core._fast(A, B, C, 5, 1e-9)  # the screen flags the row
    assert isinstance(scr, _core.Screen) and not scr.clear and scr.dI.shape == (1, 300)
    assert int(np.argmax(scr.dI[0] / scr.tau[0])) == 17 and scr.y is not None
    res = verify(A, B, C, seed=5)
    assert not res.passed and (17, 33) in res.suspect_elements
    many = A @ B
    many[::7, 3] += 1e-3 * float(np.abs(many).max())  # 43 rows: beyond max_rows = 32
    for X in (C, many):
        for lib in ("numpy", "torch"):
            args = (A, B, X)
            if lib == "torch":
                torch = pytest.importorskip("torch")
                args = tuple(torch.from_numpy(x) for x in args)
            fast, slow = verify(*args, seed=5), _general(monkeypatch, *args, seed=5)
            assert not fast.passed
            assert {k: v for k, v in fast.to_dict().items() if k != "seconds"} == \
                {k: v for k, v in slow.to_dict().items() if k != "seconds"}
    assert len(verify(A, B, many, seed=5).suspect_elements) == 43
    # NaN in an operand is still the general path's error, not a pass
    A[0, 0] = np.nan
    with pytest.raises(Exception, match="NaN or Inf"):
        verify(A, B, A @ B, seed=5)


@pytest.mark.parametrize("M", [1, 16, 100])
def test_the_shortcut_with_a_bias_and_the_guards_cached_projection_decides_as_before(
        monkeypatch, M):
    torch = pytest.importorskip("torch")
    from kcontract.freivalds._guard import Guard
    g = torch.Generator().manual_seed(M)
    W = torch.randn(300, 200, generator=g) / 200 ** 0.5
    x = torch.randn(M, 200, generator=g)
    bias = torch.randn(300, generator=g)
    C = torch.nn.functional.linear(x, W, bias)
    for use_pre in (False, True):
        # the same guard state for both paths: one guard each, the same seed
        pres = [Guard(seed=3)._pre_for(W, True) if use_pre else None for _ in range(2)]
        for seed in (0, 9):
            fast = verify(x, W.T, C, bias=bias, seed=seed, _pre=pres[0])
            slow = _general(monkeypatch, x, W.T, C, bias=bias, seed=seed, _pre=pres[1])
            assert fast.passed and slow.passed
            assert {k: v for k, v in fast.to_dict().items() if k != "seconds"} == \
                {k: v for k, v in slow.to_dict().items() if k != "seconds"}
    # a corrupted output through the cached projection is still caught, and the screen the
    # shortcut hands over gives the general path's verdict
    bad = C.clone()
    bad[0, 5] += 1e-2 * float(C.abs().max())
    assert not verify(x, W.T, bad, bias=bias, seed=1, _pre=Guard(seed=3)._pre_for(W, True))
    for use_pre in (False, True):
        pres = [Guard(seed=3)._pre_for(W, True) if use_pre else None for _ in range(2)]
        fast = verify(x, W.T, bad, bias=bias, seed=2, _pre=pres[0])
        slow = _general(monkeypatch, x, W.T, bad, bias=bias, seed=2, _pre=pres[1])
        assert not fast.passed and (0, 5) in fast.suspect_elements
        assert {k: v for k, v in fast.to_dict().items() if k != "seconds"} == \
            {k: v for k, v in slow.to_dict().items() if k != "seconds"}
