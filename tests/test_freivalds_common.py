"""verify's compiled common call (``_fastc.common``: one C-contiguous float32 / float64
product of numpy arrays with default options, in one call) against the path it shortens:
the same seed gives the same screen, bit for bit, and the same verdicts; anything it does
not take goes the general way."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from kcontract.freivalds import _core, verify
from kcontract.freivalds._core import NUMPY_FORMATS, FreivaldsResult

fastc = pytest.importorskip("kcontract.freivalds._fastc")
pytestmark = pytest.mark.skipif(_core._COMMON is None, reason="no compiled common call")

FIELDS = ("passed", "reason", "ratio", "screen_ratio", "calibrated", "shape", "operand_format",
          "accumulate", "output_format", "check_precision", "false_alarm", "backend")


def calls(monkeypatch):
    """Counts the compiled common calls (of arrays, and of tensors at their addresses)."""
    seen = []
    for name in ("_COMMON", "_COMMON_PTR"):
        real = getattr(_core, name)
        monkeypatch.setattr(_core, name, lambda *a, real=real: seen.append(1) or real(*a))
    return seen


def same(a, b, exact=True):
    """The same decision and screen; with ``exact=False`` (torch's MKL products, whose
    rounding is not reproducible from call to call: the residual's noise, which the screen
    calibrates on, differs, and an honest row may be screened in one and not the other)
    the same decision and thresholds within the calibration's sampling noise."""
    for f in FIELDS:
        if exact or f not in ("ratio", "screen_ratio"):
            assert getattr(a, f) == getattr(b, f), f
    if exact:
        assert np.array_equal(a.threshold, b.threshold)
        assert np.array_equal(a.noise_scale, b.noise_scale)
    else:
        assert np.allclose(a.threshold, b.threshold, rtol=0.5, atol=0)


@pytest.mark.parametrize("M,K,N", [(1, 64, 64), (5, 300, 80), (64, 64, 64), (65, 128, 200),
                                   (199, 256, 100), (200, 100, 300), (700, 512, 256)])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("data", ["normal", "positive"])
def test_the_common_call_decides_as_the_path_it_shortens(monkeypatch, M, K, N, dt, data):
    """Every row count the screen plans differently (every row, a sampled block, the
    median alone, the median and the 90 % point) and both formats: the compiled decision
    equals the Python one for the seed it drew."""
    rng = np.random.default_rng(M * 7 + K + N)
    draw = rng.standard_normal if data == "normal" else rng.random
    a, b = draw((M, K)).astype(dt), draw((K, N)).astype(dt)
    c = a @ b
    seen = calls(monkeypatch)
    for _ in range(4):
        got = verify(a, b, c)
        assert seen, "the common call was not made"
        ref = verify(a, b, c, seed=got.seed)  # a given seed goes the Python way
        same(got, ref)
        assert got.passed and got.seed < 2 ** 63


def operands(lib, op, out, M, K, N, seed):
    """a, b and their honest product (float32 accumulation, rounded to ``out``) as numpy
    arrays or CPU tensors of the operand dtype ``op``."""
    import ml_dtypes

    rng = np.random.default_rng(seed)
    a32 = rng.standard_normal((M, K)).astype(np.float32)
    b32 = rng.standard_normal((K, N)).astype(np.float32)
    np_dt = {"float32": np.float32, "float64": np.float64, "bfloat16": ml_dtypes.bfloat16,
             "float16": np.float16}
    a, b = a32.astype(np_dt[op]), b32.astype(np_dt[op])
    acc = np.float64 if op == "float64" else np.float32
    c = (a.astype(acc) @ b.astype(acc)).astype(np_dt[out])
    if lib == "numpy":
        return a, b, c
    torch = pytest.importorskip("torch")
    t_dt = {k: getattr(torch, k) for k in np_dt}

    def conv(x, name):
        if name in ("bfloat16",):
            return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(x)
    return conv(a, op), conv(b, op), conv(c, out).to(t_dt[out])


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("op,out", [("float32", "float32"), ("float64", "float64"),
                                    ("bfloat16", "bfloat16"), ("bfloat16", "float32"),
                                    ("float16", "float16"), ("float16", "float32")])
@pytest.mark.parametrize("M", [40, 300])
def test_every_kind_decides_as_the_path_it_shortens(monkeypatch, lib, op, out, M):
    """numpy arrays and CPU tensors, float32 / float64 products and 16-bit operands with C
    in their format or float32 (torch's on its OpenMP threads where the product is large
    enough): the same screen as the Python path for the seed drawn, and a 1e-3 max|C|
    fault (bfloat16 / float16 C: 0.5 max|C|) found."""
    a, b, c = operands(lib, op, out, M, 512, 384, M)
    seen = calls(monkeypatch)
    for _ in range(3):
        got = verify(a, b, c)
        assert seen and got.passed and got.backend == lib
        same(got, verify(a, b, c, seed=got.seed), exact=lib == "numpy")
    bad = c.copy() if lib == "numpy" else c.clone()
    big = float(np.abs(np.asarray(c, dtype=np.float64) if lib == "numpy"
                       else c.double().numpy()).max())
    bad[M // 2, 7] += (1e-3 if out in ("float32", "float64") else 0.5) * big
    res = verify(a, b, bad)
    assert not res.passed and (M // 2, 7) in res.suspect_elements


def test_a_compiled_results_list_fields_are_its_own_empty_lists(monkeypatch):
    """The compiled call's passing result makes its five list fields when first read:
    empty lists of its own (one result's list changed leaves another's empty), equal to
    the general path's for the same seed, in every view of the result (attributes,
    to_dict, dataclasses.asdict, a pickled copy, equality)."""
    import dataclasses
    import pickle

    rng = np.random.default_rng(3)
    a = rng.standard_normal((120, 96)).astype(np.float32)
    b = rng.standard_normal((96, 80)).astype(np.float32)
    c = a @ b
    verify(a, b, c)  # (the shape's plan)
    seen = calls(monkeypatch)
    one = verify(a, b, c)
    for _ in range(20):  # a fresh seed whose screen clears every row (about 199 in 200 do;
        if type(one) is _core._Passed:  # the others' results list their screened rows)
            break
        one = verify(a, b, c)
    two = verify(a, b, c, seed=9)
    assert len(seen) >= 2 and type(one) is _core._Passed and one.passed and two.passed
    names = ("suspect_rows", "suspects", "screened_rows", "suspect_columns", "row_failures")
    for name in names:
        got = getattr(one, name)
        assert got == [] and type(got) is list and getattr(one, name) is got
        got.append(("changed",))
        assert getattr(two, name) == [] and getattr(one, name) == [("changed",)]
    with monkeypatch.context() as m:
        m.setattr(_core, "_COMMON", None)
        ref = verify(a, b, c, seed=9)
    assert {k: v for k, v in two.to_dict().items() if k != "seconds"} == \
        {k: v for k, v in ref.to_dict().items() if k != "seconds"}
    fresh = verify(a, b, c, seed=9)
    for view in (dataclasses.asdict(fresh), vars(pickle.loads(pickle.dumps(fresh)))):
        assert all(view[n] == [] for n in names)
    assert dataclasses.replace(fresh, seconds=0.0) == dataclasses.replace(two, seconds=0.0)


def test_a_wrong_element_is_found_through_the_general_path_with_the_same_seed(monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((400, 300)).astype(np.float32)
    b = rng.standard_normal((300, 500)).astype(np.float32)
    c = a @ b
    c[123, 456] += 1e-4 * np.abs(c).max()
    seen = calls(monkeypatch)
    res = verify(a, b, c)
    assert seen and not res.passed and res.suspect_elements == [(123, 456)]
    ref = verify(a, b, c, seed=res.seed)
    assert ref.suspect_elements == res.suspect_elements and ref.ratio == res.ratio


def test_nan_and_inf_go_the_general_way():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((100, 80)).astype(np.float32)
    b = rng.standard_normal((80, 90)).astype(np.float32)
    c = a @ b
    c[5, 6] = np.nan
    res = verify(a, b, c)
    assert not res.passed and res.reason == "nonfinite" and (5, 6) in res.suspect_elements
    a[0, 0] = np.inf
    with np.errstate(invalid="ignore"), pytest.raises(_core.NonFiniteOperandError):
        verify(a, b, a @ b)


@pytest.mark.parametrize("case", ["transposed", "strided", "int", "mixed", "small_k", "3d",
                                  "bad_shape"])
def test_what_the_common_call_does_not_take_is_left_to_the_general_path(case):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((96, 80)).astype(np.float32)
    b = rng.standard_normal((80, 72)).astype(np.float32)
    if case == "transposed":
        a = np.asfortranarray(a)
    elif case == "strided":
        a = rng.standard_normal((96, 160)).astype(np.float32)[:, ::2]
    elif case == "int":
        a, b = a.astype(np.int32), b.astype(np.int32)
    elif case == "mixed":
        b = b.astype(np.float64)
    elif case == "small_k":
        a, b = a[:, :32].copy(), b[:32].copy()
    elif case == "3d":
        a, b = np.stack([a, a]), np.stack([b, b])
    assert fastc.common(a, b, np.zeros((1, 1), np.float32) if case == "bad_shape" else
                        np.matmul(a, b).astype(np.float32 if case != "mixed" else np.float64)) \
        is None
    if case in ("int", "mixed"):
        with pytest.raises(_core.UsageError):
            verify(a, b, np.matmul(a, b))
    elif case != "bad_shape":
        assert verify(a, b, np.matmul(a, b)).passed


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("batch", [False, True])
def test_arrays_of_the_other_byte_order_are_not_read_as_native_floats(dt, batch):
    """Big-endian float32 / float64 arrays (on a little-endian machine; the other order on a
    big-endian one): their bytes read as native floats are other numbers -- a product of
    those numbers passed as 'verified' -- so the compiled calls leave them to the general
    path, which does not take them (UsageError)."""
    rng = np.random.default_rng(8)
    other = (">" if sys.byteorder == "little" else "<") + np.dtype(dt).str[1:]
    shape_a, shape_b = ((2, 96, 80), (2, 80, 72)) if batch else ((96, 80), (80, 72))
    a = rng.standard_normal(shape_a).astype(dt)
    b = rng.standard_normal(shape_b).astype(dt)
    c = np.matmul(a, b)
    # the native product of the native values, each array relabelled as the other order
    A, B, C = a.view(other), b.view(other), c.view(other)
    call = fastc.common_batch(A, B, C, 0, None, 1.0, 0) if batch else fastc.common(A, B, C)
    assert call is None
    with pytest.raises(_core.UsageError):
        verify(A, B, C)


@pytest.mark.parametrize("op", ["bfloat16", "float16"])
@pytest.mark.parametrize("out", ["int16", "uint16", "other16", "float64"])
def test_a_16bit_product_whose_c_has_another_format_is_left_to_the_general_path(
        monkeypatch, op, out):
    """16-bit operands with a C of neither their format nor float32: C's bits are not
    read as the operands' format (an int16 array holding the product's bfloat16 bits
    passed as 'verified'); the result is the general path's -- a UsageError for integers,
    a failure for the bits read as the other 16-bit format, float64's own verdict."""
    rng = np.random.default_rng(17)
    dt = NUMPY_FORMATS[op]
    a = rng.standard_normal((96, 80)).astype(dt)
    b = rng.standard_normal((80, 72)).astype(dt)
    c = (a.astype(np.float32) @ b.astype(np.float32)).astype(dt)
    other = NUMPY_FORMATS["float16" if op == "bfloat16" else "bfloat16"]
    x = {"int16": c.view(np.int16), "uint16": c.view(np.uint16),
         "other16": c.view(other), "float64": c.astype(np.float64)}[out]

    def run():
        try:
            r = verify(a, b, x, seed=3)
        except _core.UsageError as e:
            return "UsageError", str(e)
        return r.passed, r.reason, r.output_format, r.ratio

    got = run()
    monkeypatch.setattr(_core, "_COMMON", None)
    assert got == run()
    if out in ("int16", "uint16"):
        assert got[0] == "UsageError"
    elif out == "other16":  # the same bits read as another format are not the product
        assert got[0] is False


@pytest.mark.parametrize("case", ["transposed", "sliced", "mixed", "neg", "grad", "int"])
def test_tensors_the_compiled_call_cannot_read_at_their_address_go_the_general_way(case):
    """Tensors whose memory is not their values in row-major order (transposed, sliced, a
    negative view) or of other formats are not read at their address; the verdicts are
    still right (a tensor that requires grad is read as its values)."""
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(96, 80, generator=g), torch.randn(80, 72, generator=g)
    if case == "transposed":
        a = torch.randn(80, 96, generator=g).T
    elif case == "sliced":
        a = torch.randn(96, 160, generator=g)[:, ::2]
    elif case == "mixed":
        b = b.double()
    elif case == "neg":
        a = torch._neg_view(torch.randn(96, 80, generator=g))
    elif case == "grad":
        a.requires_grad_(True)
    elif case == "int":
        a, b = a.int(), b.int()
    with torch.no_grad():
        c = torch.matmul(a.resolve_neg() if case == "neg" else a,
                         b if case != "mixed" else b.float())
    if case in ("mixed", "int"):
        with pytest.raises(_core.UsageError):
            verify(a, b, c)
        return
    assert verify(a, b, c).passed
    bad = c.clone()
    bad[3, 4] += 1e-3 * float(c.abs().max())
    assert (3, 4) in verify(a, b, bad).suspect_elements


def test_options_other_than_the_defaults_are_not_taken(monkeypatch):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((90, 70)).astype(np.float32)
    b = rng.standard_normal((70, 80)).astype(np.float32)
    c = a @ b
    seen = calls(monkeypatch)
    for kw in ({"rounds": 2}, {"groups": 2}, {"false_alarm": 1e-6}, {"seed": 2 ** 64},
               {"accumulate": "float32"}, {"bound": "deterministic"}, {"repair": True}):
        res = verify(a, b, c, **kw)
        assert res.passed
    assert not seen
    assert verify(a, b, c, false_alarm=1e-6).false_alarm == 1e-6
    res = verify(a, b, c, seed=3)  # a given seed (below 2^64) is the compiled call's
    assert seen and res.seed == 3 and res.passed


def test_fresh_seeds_differ_between_calls_and_after_a_fork():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((80, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    c = a @ b
    seeds = [verify(a, b, c).seed for _ in range(50)]
    assert len(set(seeds)) == 50
    if not hasattr(os, "fork"):
        return
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child's next seed, to the parent
        try:
            os.write(w, str(verify(a, b, c).seed).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r) as fh:
        child = int(fh.read())
    assert child != verify(a, b, c).seed


def batch_operands(lib, dt, B, H, T, D, seed):
    """Attention's q k^T with the strided views of a fused q/k/v projection."""
    rng = np.random.default_rng(seed)
    qkv = rng.standard_normal((B, T, 3 * H * D)).astype(dt)
    if lib == "torch":
        torch = pytest.importorskip("torch")
        qkv = torch.from_numpy(qkv)
        q, k = (qkv[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D).transpose(1, 2)
                for i in range(2))
        kt = k.transpose(-2, -1)
        return q, kt, torch.matmul(q, kt)
    q, k = (qkv[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D).transpose(0, 2, 1, 3)
            for i in range(2))
    kt = k.swapaxes(-1, -2)
    return q, kt, np.matmul(q, kt)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("T", [64, 200, 256])
def test_a_batch_decides_as_the_path_it_shortens(monkeypatch, lib, dt, T):
    """Strided batches (q, k^T of a fused projection): the compiled batch call's thresholds,
    scales and ratio equal the Python path's for the seed it drew (the median alone, and
    with the 90 % point), and a wrong element of one matrix is found."""
    a, b, c = batch_operands(lib, dt, 2, 3, T, 64, T)
    seen = []
    real = _core._COMMON_BATCH
    monkeypatch.setattr(_core, "_COMMON_BATCH", lambda *x: seen.append(1) or real(*x))
    for _ in range(3):
        got = verify(a, b, c)
        assert seen and got.passed and got.backend == lib and got.shape == ((2, 3), T, 64, T)
        same(got, verify(a, b, c, seed=got.seed), exact=lib == "numpy")
    bad = c.copy() if lib == "numpy" else c.clone()
    bad[1, 2, T // 2, 5] += 1e-3 * float(abs(bad).max())
    res = verify(a, b, bad)
    assert not res.passed and res.suspect_elements == [(1, 2, T // 2, 5)]


def test_a_batch_the_compiled_call_does_not_take_goes_the_general_way():
    """Too few rows to calibrate each matrix, a layout without a unit stride, 16-bit: the
    general path, with the same verdicts."""
    rng = np.random.default_rng(8)
    small = rng.standard_normal((4, 32, 64)).astype(np.float32)
    bm = rng.standard_normal((4, 64, 80)).astype(np.float32)
    assert verify(small, bm, small @ bm).passed
    a = rng.standard_normal((3, 100, 128)).astype(np.float32)[:, :, ::2]
    b = rng.standard_normal((3, 64, 70)).astype(np.float32)
    assert fastc.common_batch(a, b, a @ b, 0) is None
    assert verify(a, b, a @ b).passed


def attention_output(dt, B, H, T, D, seed):
    """softmax(q k^T) v with causal masking (numpy): the first positions' rows are single
    rows of v, the last ones averages of many, so the rows' noise differs by a factor of
    sqrt(T); v a strided view of a fused projection."""
    rng = np.random.default_rng(seed)
    qkv = rng.standard_normal((B, T, 3 * H * D)).astype(dt)
    q, k, v = (qkv[..., i * H * D:(i + 1) * H * D].reshape(B, T, H, D).transpose(0, 2, 1, 3)
               for i in range(3))
    s = np.matmul(q, k.swapaxes(-1, -2)) / np.sqrt(D)
    s = np.where(np.triu(np.ones((T, T), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    att = (p / p.sum(axis=-1, keepdims=True)).astype(dt)
    return att, v, np.matmul(att, v)


def _both_paths(monkeypatch, a, b, c, **kw):
    """verify's result, whether it called the general path (_verify), and the general
    path's own result (the compiled batched call taken away)."""
    general = []
    real = _core._verify
    with monkeypatch.context() as m:
        m.setattr(_core, "_verify", lambda *x: general.append(1) or real(*x))
        got = verify(a, b, c, **kw)
    with monkeypatch.context() as m:
        m.setattr(_core, "_COMMON_BATCH", None)  # the general path
        ref = verify(a, b, c, **kw)
    return got, bool(general), ref


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_a_batch_beyond_its_screen_takes_the_per_row_look_compiled(monkeypatch, dt):
    """Attention's att @ v: rows beyond the screen that are within their own noise pass in
    the compiled call, with the ratio and verdict of the general path's per-row look; a
    wrong element is still found."""
    a, b, c = attention_output(dt, 2, 4, 128, 64, 3)
    relieved = 0
    for seed in range(12):
        got, general, ref = _both_paths(monkeypatch, a, b, c, seed=seed)
        assert got.passed and ref.passed and got.screened_rows == ref.screened_rows
        assert got.ratio == pytest.approx(ref.ratio, rel=1e-9)
        assert got.screen_ratio == pytest.approx(ref.screen_ratio, rel=1e-12)
        assert got.message == ref.message
        if got.message == _core._RELIEVED:
            relieved += 1
            assert not general  # decided in the compiled call
    assert relieved >= 3  # the case the per-row look is for, seen
    for t in (0, 100):
        bad = c.copy()
        bad[1, 2, t, 5] += 1e-4 * float(abs(c).max())
        res = verify(a, b, bad)
        assert not res.passed and res.suspect_elements == [(1, 2, t, 5)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_a_batch_with_a_row_beyond_its_own_noise_hands_over_the_second_looks_ratios(dt):
    """Where a row is beyond even its own noise the compiled call hands the general path
    every row's ratio after the per-row look: row_relief's (the general path's) numbers,
    so that only the rows beyond are recomputed; the verdict is the general path's."""
    from kcontract.freivalds._screen import ratio_rows, row_relief

    a, b, c = attention_output(dt, 2, 4, 128, 64, 3)
    handed = 0
    for t, j in ((0, 5), (100, 7), (127, 0)):
        bad = c.copy()
        bad[1, 2, t, j] += 1e-4 * float(abs(c).max())
        for seed in range(3):
            out = _core._common_batch(a, b, bad, 0, seed)
            assert type(out) is tuple and out[1].rows is not None
            scr = out[1]
            p = _core._problem(a, b, bad, None, None)
            items = scr.rows.shape[0]
            ref = row_relief(p, ratio_rows(p, scr, 1, items), _core._units(p))
            assert scr.rows.shape == ref.shape == (8, 128)
            np.testing.assert_allclose(scr.rows, ref, rtol=1e-9, atol=0)
            assert scr.rows[6, t] > 1.0  # the wrong element's row (matrix (1, 2))
            handed += 1
            res = verify(a, b, bad, seed=seed)
            assert not res.passed and res.suspect_elements == [(1, 2, t, j)]
    assert handed == 9


def test_rows_beyond_their_own_noise_are_recomputed_in_float64_in_the_compiled_call(
        monkeypatch):
    """float32 attention att @ v: where a few rows are beyond even their own noise, the
    compiled call recomputes them in float64 against their element bounds (the general
    path's stage 2) and passes the batch without the general path: the same screened rows,
    message and screen, the ratio up to the order of the float64 sums.  Where more rows
    are left than max_rows, or a row is wrong (one element, or every element a little:
    the row aggregate), the general path decides and reports."""
    from kcontract.freivalds import _model
    from kcontract.freivalds._screen import ROW_RELIEF_MIN, signs

    a, b, c = attention_output(np.float32, 2, 4, 128, 64, 7)
    M, K, N = 128, 128, 64
    units = _core._units_for("float32", "float32", "float32")
    L_e = _model.element_log_term(8 * M * N, _core.DEFAULT_FALSE_ALARM / 2)
    decided = 0
    for seed in range(100):
        if decided == 4:
            break
        got, general, ref = _both_paths(monkeypatch, a, b, c, seed=seed)
        if not got.screened_rows:
            continue
        assert got.passed and ref.passed and not general
        assert got.screened_rows == ref.screened_rows and got.message == ref.message
        assert got.ratio == pytest.approx(ref.ratio, rel=1e-6) and 0 < got.ratio <= 1
        assert got.screen_ratio == ref.screen_ratio
        assert np.array_equal(got.threshold, ref.threshold)
        decided += 1
        # fewer rows allowed than are left: the general path
        few, general, _ = _both_paths(monkeypatch, a, b, c, seed=seed,
                                      max_rows=len(got.screened_rows) - 1)
        assert general and few.passed and few.unexamined_rows == 1
        idx = got.screened_rows[0]
        row = a[idx[:2]][idx[2]].astype(np.float64)
        bm = b[idx[:2]].astype(np.float64)
        exact = row @ bm
        bound = _model.element_bounds(exact, np.abs(row) @ np.abs(bm), K, units, L_e)
        r = signs(seed, 0, N, np.float64)
        away = r * np.sign(float((c[idx] - exact) @ r))  # (the row's residual grows)
        bad = c.copy()  # one element 1.1 times its bound off: beyond it, the row's
        bad[idx + (5,)] += np.float32(1.1 * bound[5] * away[5])  # aggregate not
        out = _core._COMMON_BATCH(a, b, bad, 0, seed, ROW_RELIEF_MIN, 32)
        assert len(out) == 8  # handed over: the float64 look did not clear it
        res = verify(a, b, bad, seed=seed)
        assert not res.passed and res.suspect_elements == [idx + (5,)]
        assert not res.row_failures
        # every element of the row off by half its bound: each within its bound, the
        # row's aggregate far beyond
        bad = c.copy()
        bad[idx] = (bad[idx] + 0.5 * bound * away).astype(np.float32)
        out = _core._COMMON_BATCH(a, b, bad, 0, seed, ROW_RELIEF_MIN, 32)
        assert len(out) == 8
        res = verify(a, b, bad, seed=seed)
        assert not res.passed and idx in res.row_failures and not res.suspect_elements
    assert decided >= 3


def test_a_compiled_result_makes_its_threshold_and_scale_arrays_when_read():
    """The compiled call's passing result holds its numbers until a field is read: then
    the values the general path gives (threshold and noise_scale: a 0-d array for one
    matrix, the batch shape for a batch); its copies and pickles are plain results with
    the same fields; a field written before it is read keeps what was written."""
    import copy
    import dataclasses
    import pickle

    rng = np.random.default_rng(5)
    names = [f.name for f in dataclasses.fields(FreivaldsResult)]
    for shape in ((96, 80), (3, 96, 80)):
        a = rng.standard_normal(shape[:-1] + (72,)).astype(np.float32)
        b = rng.standard_normal(shape[:-2] + (72, 80)).astype(np.float32)
        c = np.matmul(a, b)
        ref = verify(a, b, c, seed=7, accumulate="float32")  # the general path
        got = verify(a, b, c, seed=7)
        assert type(got) is _core._Passed and vars(got) == {}  # (nothing made yet)
        assert isinstance(got.noise_scale, np.ndarray) and "threshold" not in vars(got)
        assert isinstance(got.threshold, np.ndarray) and got.threshold.shape == shape[:-2]
        assert np.array_equal(got.threshold, ref.threshold)
        assert np.array_equal(got.noise_scale, ref.noise_scale)
        assert got.rounds == 1 and got.bound == "probabilistic" and got.message == ""
        for name in ("passed", "reason", "shape", "operand_format", "accumulate",
                     "output_format", "check_precision", "calibrated", "false_alarm",
                     "suspect_rows", "suspects", "screened_rows", "unexamined_rows"):
            assert getattr(got, name) == getattr(ref, name), name
        assert repr(got).startswith("FreivaldsResult(passed=True")
        fresh = verify(a, b, c, seed=7)
        for cp in (pickle.loads(pickle.dumps(fresh)), copy.copy(fresh), copy.deepcopy(fresh),
                   dataclasses.replace(fresh)):
            assert type(cp) in (FreivaldsResult, _core._Passed)
            for name in names:
                x, y = getattr(cp, name), getattr(fresh, name)
                assert np.array_equal(x, y) if isinstance(y, np.ndarray) else x == y, name
        got = verify(a, b, c, seed=7)
        got.threshold = "set"  # a field set before it is read stays
        assert np.array_equal(got.noise_scale, ref.noise_scale) and got.threshold == "set"
        got.passed = False
        assert not got and vars(got)["passed"] is False


# --- CPU tensors of a shape taken twice: one compiled call, no property reads ------------

def reading(monkeypatch):
    """Fresh remembered shapes, and a count of the property-reading common calls."""
    monkeypatch.setattr(_core, "_SHAPES", ())
    monkeypatch.setattr(_core, "_SEEN", {})
    seen = []
    real = _core._tensor_args
    monkeypatch.setattr(_core, "_tensor_args", lambda *a: seen.append(1) or real(*a))
    return seen


def tensor_guards_usable():
    from kcontract.freivalds import _tensorguards
    return bool(_tensorguards.tensor_guards())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tensors_of_a_shape_taken_twice_are_then_taken_in_one_call(monkeypatch, dtype):
    torch = pytest.importorskip("torch")
    if not tensor_guards_usable():
        pytest.skip("torch without a usable TensorGuards")
    g = torch.Generator().manual_seed(2)
    dt = getattr(torch, dtype)
    a, b = torch.randn(96, 80, generator=g).to(dt), torch.randn(80, 72, generator=g).to(dt)
    c = torch.matmul(a.float(), b.float()).to(dt)
    seen, ptr = reading(monkeypatch), calls(monkeypatch)
    first = [verify(a, b, c, seed=s) for s in range(2)]  # (seen once, twice: remembered)
    n = len(seen)
    assert len(_core._SHAPES) == 1 and n >= 2
    results = [verify(a, b, c, seed=s) for s in range(2, 6)]
    assert all(r.passed for r in first + results) and len(ptr) >= 6 and len(seen) == n
    bad = c.clone()  # (an element off by four times the threshold: found)
    bad[5, 6] += 4 * float(np.max(results[-1].threshold))
    res = verify(a, b, bad)
    assert not res.passed and (5, 6) in res.suspect_elements and len(seen) == n
    # the same screen as the property-reading call's with the same seed
    monkeypatch.setattr(_core, "_SHAPES", ())
    assert verify(a, b, c, seed=5).screen_ratio == results[-1].screen_ratio
    assert len(seen) == n + 1


@pytest.mark.parametrize("case", ["neg", "transposed", "dtype", "shape", "grad", "subclass"])
def test_tensors_unlike_a_remembered_shape_are_read_anew(monkeypatch, case):
    torch = pytest.importorskip("torch")
    if not tensor_guards_usable():
        pytest.skip("torch without a usable TensorGuards")
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(96, 80, generator=g), torch.randn(80, 72, generator=g)
    c = torch.matmul(a, b)
    seen = reading(monkeypatch)
    for s in range(3):
        assert verify(a, b, c, seed=s).passed
    n = len(seen)
    assert verify(a, b, c, seed=3).passed and len(seen) == n and len(_core._SHAPES) == 1
    cc, want = c, True
    if case == "neg":  # memory holding c, values -c: a wrong product
        cc, want = torch._neg_view(c), False
    elif case == "transposed":
        cc = c.T.contiguous().T
    elif case == "dtype":
        a, b, cc = a.double(), b.double(), torch.matmul(a.double(), b.double())
    elif case == "shape":
        a = torch.cat([a, a])
        cc = torch.matmul(a, b)
    elif case == "grad":
        a = a.clone().requires_grad_(True)
    elif case == "subclass":
        class Sub(torch.Tensor):
            pass
        a = a.as_subclass(Sub)
    assert verify(a, b, cc).passed is want
    assert (len(seen) > n) is (case != "subclass")  # (a subclass: the general path at once)


def test_at_most_a_few_shapes_are_remembered(monkeypatch):
    torch = pytest.importorskip("torch")
    if not tensor_guards_usable():
        pytest.skip("torch without a usable TensorGuards")
    reading(monkeypatch)
    for m in range(64, 64 + _core.SHAPES_KEPT + 2):
        a, b = torch.randn(m, 80), torch.randn(80, 72)
        for _ in range(2):
            assert verify(a, b, torch.matmul(a, b)).passed
    assert [s[1][0] for s in _core._SHAPES] == list(range(64 + _core.SHAPES_KEPT + 1, 65, -1))
