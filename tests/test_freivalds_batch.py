"""The compiled stage 1 of a batch of matrices (kcontract.freivalds._screen.batch_screen):
the same products as numpy's per matrix, the screen's statistics of every matrix, the same
verdicts from the common call and the general path, and the detection / false-alarm
figures on the strided layouts of attention (a fused q/k/v split into heads, k
transposed)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kcontract.freivalds import NonFiniteOperandError, _cblas, _core, _model, _screen, verify

fastc = pytest.importorskip("kcontract.freivalds._fastc")


def _units(dt):
    name = np.dtype(dt).name
    return _core._units_for(name, name, name)


def _attention(dt, seed=0, B=2, T=128, H=4, D=64):
    """q kT and softmax-free (q kT) v with the layouts a fused q/k/v projection gives:
    q, k, v are (B, H, T, D) views of one (B, T, 3 H D) array (rows of stride 3 H D),
    kT a transposed view (column-major per matrix)."""
    rng = np.random.default_rng(seed)
    qkv = rng.standard_normal((B, T, 3 * H * D)).astype(dt)
    q, k, v = (qkv[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D).transpose(0, 2, 1, 3)
               for i in range(3))
    kt = k.swapaxes(-1, -2)
    att = np.matmul(q, kt)
    return (q, kt, att), (att, v, np.matmul(att, v))


def _layouts(dt):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 5, 100, 70)).astype(dt)
    b = rng.standard_normal((3, 5, 70, 90)).astype(dt)
    qk, av = _attention(dt)
    wide = np.zeros((3, 5, 100, 200), dtype=dt)
    wide[..., :90] = a @ b
    return {
        "contiguous": (a, b, a @ b),
        "b column-major": (a, np.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2), a @ b),
        "a column-major, c strided": (
            np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2), b, wide[..., :90]),
        "q kT": qk,
        "att v": av,
    }


def _large_f32():
    """float32 batches of matrices above the size whose products are always the helper's
    own (row-major, and A column-major with 300 rows: its longer kernel)."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 300, 200)).astype(np.float32)
    b = rng.standard_normal((2, 200, 300)).astype(np.float32)
    acol = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
    assert 300 * 200 * 2 + 300 * 300 > fastc.OWN_BATCH_MAX_ELEMS
    return {"large": (a, b, a @ b), "large, a column-major": (acol, b, a @ b)}


def _products_match(dt) -> int:
    """The residuals of every layout against numpy's or float64's (see below); how many
    layouts had the helper's own products."""
    layouts = _layouts(dt)
    if dt is np.float32:
        layouts.update(_large_f32())
    u = 2.0 ** -24

    def gam(n):
        return n * u / (1 - n * u)

    owned = 0
    for name, (a, b, c) in layouts.items():
        seed = 11
        scr = _screen.batch_screen(a, b, c, seed, _cblas.gemv(), _units(dt))
        assert scr is not None, name
        M, K = a.shape[-2:]
        N = b.shape[-1]
        r = _screen.signs(seed, 0, N, dt)
        k, i0 = _screen.SAMPLE_ROWS, seed % (M - _screen.SAMPLE_ROWS + 1)
        own = dt is np.float32 and fastc.own_batch(math.prod(a.shape[:-2]), M, K, N)
        owned += own
        taus = []
        for t, idx in enumerate(np.ndindex(a.shape[:-2])):
            y = b[idx] @ r
            d = np.abs((a[idx] @ y).astype(np.float64) - c[idx] @ r)
            if own:  # the helper's float32 sums: within their bound of the float64 ones
                A, B, C = (x[idx].astype(np.float64) for x in (a, b, c))
                r64 = r.astype(np.float64)
                y64, ey = B @ r64, gam(N) * (np.abs(B) @ np.abs(r64))
                ez = gam(K) * (np.abs(A) @ (np.abs(y64) + ey)) + np.abs(A) @ ey
                ew = gam(N) * (np.abs(C) @ np.abs(r64))
                d64 = np.abs(A @ y64 - C @ r64)
                assert np.all(np.abs(scr.dI[t] - d64) <= 1.01 * (ez + ew)), (name, idx)
                d = scr.dI[t]
            else:
                assert np.array_equal(scr.dI[t], d), (name, idx)
            # the matrix's own threshold from its median, its rows i0.. and ||y||
            cn = math.sqrt(float(np.sum(c[idx][i0:i0 + k].astype(np.float64) ** 2)) / k)
            sn = math.sqrt(float(np.sum(a[idx][i0:i0 + k].astype(np.float64) ** 2)) / k) \
                * math.sqrt(float(np.sum(y.astype(np.float64) ** 2)) / K)
            cap = _model.screen_cap(cn, sn, K, N, _units(dt))
            med = float(np.partition(d, M // 2)[M // 2])
            if M >= _model.TAIL_CALIBRATION_ROWS:  # (and the 90 % point, for as many rows)
                k9 = int(0.9 * M)
                med = max(med, float(np.partition(d, k9)[k9]) * _model.MEDIAN_ABS_NORMAL
                          / _model.Q90_ABS_NORMAL)
            taus.append(_model.LAMBDA_SCREEN * min(max(med / _model.MEDIAN_ABS_NORMAL,
                                                       _model.FLOOR_FRACTION * cap), cap))
        assert scr.tau == pytest.approx(np.array(taus), rel=1e-12), name
        assert scr.ratio == pytest.approx(float((scr.dI.max(axis=1) / scr.tau).max()), rel=1e-12)
    return owned


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_batch_products_are_numpys_per_matrix_bit_for_bit(dt):
    """For numpy arrays the compiled batch calls numpy's BLAS as numpy's own X @ v does
    (float64; float32 matrices too large for the helper's own products where OpenBLAS's
    threads outnumber the batch's matrices), for every layout: each matrix's residual is
    |A_t (B_t r) - C_t r| exactly as numpy computes it.  Otherwise float32 matrices have
    the helper's products (f32_gemv_avx512, each matrix on one of OpenBLAS's threads):
    each residual within float32 accumulation's bound of the float64 one, for every
    layout (row- and column-major operands, rows of 100 and 300 and columns of 70 / 90:
    the kernels' vector blocks, masked rests and scalar tails).  The statistics are those
    of the screen's residual and of the sampled rows."""
    owned = _products_match(dt)
    if dt is np.float32 and fastc.FEW_ROWS_KERNEL:
        assert owned >= len(_layouts(dt))  # (every small batch's)
    if dt is np.float32 and _cblas.blas_pool():  # without the pool: the large ones BLAS's
        large = fastc.own_batch(2, 300, 200, 300)
        try:
            fastc.set_blas_pool(0, 0)
            assert not fastc.own_batch(2, 300, 200, 300)
            assert _products_match(dt) == owned - 2 * large
        finally:
            _cblas._BLAS_POOL = None
            assert _cblas.blas_pool()


def test_an_exact_batch_is_held_to_its_sampled_rows_model_floor():
    """Small integers multiply exactly: every residual is 0, and each matrix's threshold is
    the floor fraction of its model cap, read from the rows the seed samples (whose
    magnitudes here differ from row to row) and ||y_t||."""
    rng = np.random.default_rng(3)
    M, K, N = 80, 64, 72
    a = (rng.integers(-3, 4, (5, M, K)) * rng.integers(1, 9, (5, M, 1))).astype(np.float32)
    b = rng.integers(-3, 4, (5, K, N)).astype(np.float32)
    c = np.matmul(a, b)
    for seed in (0, 5, 40, 76):
        scr = _screen.batch_screen(a, b, c, seed, _cblas.gemv(), _units(np.float32))
        assert scr is not None and not scr.dI.any()
        r = _screen.signs(seed, 0, N, np.float32)
        k = _screen.SAMPLE_ROWS
        i0 = seed % (M - k + 1)
        for t in range(5):
            cn = math.sqrt(float(np.sum(c[t, i0:i0 + k].astype(np.float64) ** 2)) / k)
            y = (b[t] @ r).astype(np.float64)
            sn = math.sqrt(float(np.sum(a[t, i0:i0 + k].astype(np.float64) ** 2)) / k) \
                * math.sqrt(float(y @ y) / K)
            cap = _model.screen_cap(cn, sn, K, N, _units(np.float32))
            want = _model.LAMBDA_SCREEN * _model.FLOOR_FRACTION * cap
            assert scr.tau[t] == pytest.approx(want, rel=1e-12), (seed, t)


def test_layouts_without_a_unit_stride_take_the_general_arithmetic():
    rng = np.random.default_rng(2)
    big = rng.standard_normal((4, 200, 160)).astype(np.float32)
    a = big[:, ::2, ::2]  # no unit stride along either axis
    b = rng.standard_normal((4, 80, 96)).astype(np.float32)
    c = np.matmul(a, b)
    assert _screen.batch_screen(a, b, c, 3, _cblas.gemv(), _units(np.float32)) is None
    assert verify(a, b, c, seed=3).passed
    bad = c.copy()
    bad[2, 17, 5] += 1e-3 * float(np.abs(c).max())
    res = verify(a, b, bad, seed=3)
    assert not res.passed and res.suspect_elements == [(2, 17, 5)]


def _same(r1, r2):
    assert r1.passed == r2.passed and r1.reason == r2.reason
    assert np.array_equal(r1.threshold, r2.threshold)
    assert np.array_equal(r1.noise_scale, r2.noise_scale)
    assert r1.screen_ratio == r2.screen_ratio
    if r1.passed and r1.screened_rows:  # (rows recomputed in float64 by the compiled call:
        assert r1.ratio == pytest.approx(r2.ratio, rel=1e-6)  # its order of the sums)
    else:
        assert r1.ratio == r2.ratio
    assert r1.suspect_elements == r2.suspect_elements
    assert r1.screened_rows == r2.screened_rows


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_the_batched_common_call_decides_as_the_general_path(lib, dt):
    """The common call (default options) and the general path (an explicit accumulator,
    the same formats) share the batch's stage 1: identical thresholds, ratios and suspects
    for honest products, for products with a corrupted element (whose screen the common
    call hands to the general path) and for an honest one with screened rows."""
    conv = (lambda x: x) if lib == "numpy" else pytest.importorskip("torch").from_numpy
    acc = np.dtype(dt).name
    screened = 0
    for name, (a, b, c) in _layouts(dt).items():
        bad = c.copy()
        bad[(0,) * (c.ndim - 2) + (7, 3)] += 1e-3 * float(np.abs(c).max())
        for seed in range(6):
            for cc in (c, bad):
                r1 = verify(conv(a), conv(b), conv(cc), seed=seed)
                r2 = verify(conv(a), conv(b), conv(cc), seed=seed, accumulate=acc)
                _same(r1, r2)
                assert r1.threshold.shape == a.shape[:-2] and r1.backend == lib
                screened += r1.screen_ratio > 1
            assert not verify(conv(a), conv(b), conv(bad), seed=seed).passed, (name, seed)
    assert screened > 0  # the hand-over was exercised


@pytest.mark.parametrize("max_rows", [2 ** 70, -5, 0])
def test_any_int_max_rows_is_taken_by_a_batch_as_by_the_general_path(max_rows):
    """max_rows beyond a C size, negative or zero: the batch's verdict and screened rows
    are the general path's (no overflow from the compiled call)."""
    (a, b, c), _ = _attention(np.float32)
    bad = c.copy()
    bad[1, 2, 7, 3] += 1e-3 * float(np.abs(c).max())
    for cc in (c, bad):
        for seed in range(3):
            r1 = verify(a, b, cc, seed=seed, max_rows=max_rows)
            r2 = verify(a, b, cc, seed=seed, max_rows=max_rows, accumulate="float32")
            assert r1.passed == r2.passed == (cc is c)
            assert r1.screened_rows == r2.screened_rows


def test_without_the_helper_the_same_verdicts_and_thresholds_close(monkeypatch):
    """Without the compiled helper the general path's numpy arithmetic decides (float32
    sums of squares, numpy's batched products): the same verdicts and suspects, thresholds
    equal up to the summation order."""
    cases = []
    for name, (a, b, c) in _layouts(np.float32).items():
        bad = c.copy()
        bad[(1,) * (c.ndim - 2) + (20, 9)] += 1e-3 * float(np.abs(c).max())
        cases += [(a, b, c), (a, b, bad)]
    ref = [verify(*x, seed=9) for x in cases]
    monkeypatch.setattr(_screen, "_fastc", None)
    monkeypatch.setattr(_core, "_fastc", None)
    got = [verify(*x, seed=9) for x in cases]
    for r, g in zip(ref, got):
        assert r.passed == g.passed and r.suspect_elements == g.suspect_elements
        assert r.threshold == pytest.approx(g.threshold, rel=1e-4)
    assert [r.passed for r in ref] == [True, False] * (len(cases) // 2)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_one_element_off_by_1e_4_of_max_is_caught_in_every_matrix_of_a_batch(lib):
    conv = (lambda x: x) if lib == "numpy" else pytest.importorskip("torch").from_numpy
    (q, kt, att), (p, v, o) = _attention(np.float32, seed=4)
    rng = np.random.default_rng(5)
    for a, b, c in ((q, kt, att), (p, v, o)):
        for trial in range(24):
            bad = c.copy()
            pos = tuple(int(rng.integers(0, s)) for s in c.shape)
            bad[pos] += (1 if trial % 2 else -1) * 1e-4 * float(np.abs(c).max())
            res = verify(conv(a), conv(b), conv(bad), seed=trial)
            assert not res.passed and res.suspect_elements == [pos], (pos, res.message)


def test_no_false_alarm_on_honest_batches():
    """Honest batched products of the attention layouts and of plain batches pass for every
    seed (the screen's per-matrix calibration; its second look where a row crosses)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    cases = list(_attention(np.float32, seed=7)) + list(_attention(np.float64, seed=8))
    for M, K, N in ((64, 64, 64), (256, 96, 128), (130, 300, 17)):
        a = (rng.standard_normal((6, M, K)) * 10.0 ** rng.integers(-3, 3)).astype(np.float32)
        b = rng.standard_normal((6, K, N)).astype(np.float32)
        cases.append((a, b, np.matmul(a, b)))
    fails = 0
    for a, b, c in cases:
        for seed in range(60):
            fails += not verify(a, b, c, seed=seed).passed
        for seed in range(20):  # torch's own batched products
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            fails += not verify(ta, tb, torch.matmul(ta, tb), seed=seed).passed
    assert fails == 0


def test_non_finite_values_in_a_batch_are_traced_as_before():
    (q, kt, att), _ = _attention(np.float32, seed=9)
    bad = att.copy()
    bad[1, 2, 30, 40] = np.nan
    res = verify(q, kt, bad, seed=1)
    assert not res.passed and res.reason == "nonfinite" and (1, 2, 30, 40) in \
        res.suspect_elements
    qn = q.copy()
    qn[0, 1, 5, 6] = np.inf
    with pytest.raises(NonFiniteOperandError):
        verify(qn, kt, att, seed=1)


def _causal(dt, seed=0, B=2, T=128, H=4, D=64):
    """softmax(q kT + causal mask) v: rows of C whose noise differs by far more than the
    screen's median calibration assumes (row i averages i + 1 rows of v)."""
    (q, kt, att), (_, v, _) = _attention(dt, seed, B, T, H, D)
    s = att / math.sqrt(D) + np.triu(np.full((T, T), -np.inf), 1).astype(dt)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p = (p / p.sum(axis=-1, keepdims=True)).astype(dt)
    return p, v, np.matmul(p, v)


def test_the_compiled_second_look_equals_the_per_matrix_one(monkeypatch):
    """The screened matrices' per-row noise computed in one compiled pass gives the ratios
    the per-matrix loop gives (float64 norms there, float32 here: equal to rounding), and
    the same rows are left for the float64 recomputation."""
    from kcontract.freivalds._core import _problem
    p, v, o = _causal(np.float32, seed=2)
    calls = []
    orig = _screen._batch_relief
    monkeypatch.setattr(_screen, "_batch_relief",
                        lambda *a: calls.append(1) or orig(*a))
    changed = 0
    for seed in range(30):
        pr = _problem(p, v, o, None, None)
        units = _core._units(pr)
        scr = _screen.batch_screen(p, v, o, seed, _cblas.gemv(), units)
        rr = _screen.ratio_rows(pr, scr, 1, math.prod(pr.batch))
        fast = _screen.row_relief(pr, rr, units)
        monkeypatch.setattr(_screen, "_fastc", None)
        slow = _screen.row_relief(pr, rr, units)
        monkeypatch.setattr(_screen, "_fastc", fastc)
        changed += not np.array_equal(fast, rr)
        assert fast == pytest.approx(slow, rel=1e-5)
        assert np.array_equal(np.argwhere(fast > 1), np.argwhere(slow > 1))
    assert calls and changed >= 3  # the second look was taken and changed ratios


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_causal_attention_products_pass_and_their_faults_are_caught(lib):
    conv = (lambda x: x) if lib == "numpy" else pytest.importorskip("torch").from_numpy
    p, v, o = _causal(np.float32, seed=3)
    assert all(verify(conv(p), conv(v), conv(o), seed=s).passed for s in range(40))
    rng = np.random.default_rng(4)
    for trial in range(16):  # early rows (the noisiest) and late ones
        pos = (int(rng.integers(0, 2)), int(rng.integers(0, 4)),
               int(rng.integers(0, 4)) if trial % 2 else int(rng.integers(4, 128)),
               int(rng.integers(0, 64)))
        bad = o.copy()
        bad[pos] += 1e-4 * float(np.abs(o).max())
        res = verify(conv(p), conv(v), conv(bad), seed=trial)
        assert not res.passed and res.suspect_elements == [pos], (pos, res.message)


def test_torch_batches_run_on_torchs_threads_and_decide_alike_without_them():
    """A batch of CPU tensors has its matrices shared out among torch's OpenMP threads (one
    fork per batch, each product on one thread); without the pool registered the calling
    thread runs them: the same verdicts, and for row-major operands the same screen."""
    torch = pytest.importorskip("torch")
    from kcontract.freivalds import _cblas
    from kcontract.freivalds._screen import _fastc

    if _fastc is None or not _cblas.torch_pool():
        pytest.skip("no compiled helper or OpenMP runtime to register")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 4, 128, 64)).astype(np.float32)
    b = rng.standard_normal((6, 4, 64, 96)).astype(np.float32)
    c = np.matmul(a, b)
    bad = c.copy()
    bad[2, 1, 40, 7] += 1e-4 * float(np.abs(c).max())
    A, B, C, BAD = (torch.from_numpy(x) for x in (a, b, c, bad))

    def run():
        return [verify(A, B, C, seed=s) for s in range(4)] + [verify(A, B, BAD, seed=1)]
    n0 = _fastc.pool_batches()
    pooled = run()
    assert _fastc.pool_batches() - n0 >= 5  # every check's batch on the pool
    try:
        _fastc.set_pool(0, 0, 0)
        n0 = _fastc.pool_batches()
        serial = run()
        assert _fastc.pool_batches() == n0
    finally:
        _cblas._POOL = None
        assert _cblas.torch_pool()
    for p, s in zip(pooled[:4], serial[:4]):
        assert p.passed and s.passed and p.screen_ratio == s.screen_ratio
        assert np.array_equal(p.threshold, s.threshold) and p.threshold.shape == (6, 4)
    for res in (pooled[4], serial[4]):
        assert not res.passed and res.suspect_elements == [(2, 1, 40, 7)]
