"""The compiled per-call helpers (kcontract.freivalds._fastc) against the numpy arithmetic
they replace: the same signs, the same residual and order statistics, the same screen up
to the summation order of two sums of squares, and the same verdicts either way."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from kcontract.freivalds import _backend, _core, _mkl, _screen, verify

fastc = pytest.importorskip("kcontract.freivalds._fastc")
UNITS = _core._units_for("float32", "float32", "float32")


@pytest.fixture
def numpy_only(monkeypatch):
    """The check without the compiled helpers (as where they could not be built)."""
    def off():
        monkeypatch.setattr(_screen, "_fastc", None)
        monkeypatch.setattr(_backend, "_fastc", None)
    return off


@pytest.mark.parametrize("n", [1, 15, 16, 64, 1000, 4097])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int8])
def test_signs_are_the_same_with_and_without_the_helper(numpy_only, n, dt):
    got = [_screen.signs(seed, 2, n, dt) for seed in list(range(30)) + [2 ** 70 + 3]]
    numpy_only()
    for seed, g in zip(list(range(30)) + [2 ** 70 + 3], got):
        ref = _screen.signs(seed, 2, n, dt)
        assert g.dtype == ref.dtype and np.array_equal(g, ref)


@pytest.mark.parametrize("M", [1, 16, 64, 65, 199, 200, 1000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_screen_one_matches_numpy(numpy_only, M, dtype):
    rng = np.random.default_rng(M)
    K, N = 96, 80
    A = rng.standard_normal((M, K)).astype(dtype)
    C = rng.standard_normal((M, N)).astype(dtype)
    y = rng.standard_normal(K).astype(dtype)
    z = rng.standard_normal(M).astype(dtype)
    w = (z + rng.standard_normal(M) * 1e-6).astype(dtype)
    w[M // 3] = z[M // 3] + 1.0  # one outlier: the max, not the median
    got = _screen.screen_one(z, w, A, C, y, None, 11, M, K, N, UNITS)
    numpy_only()
    ref = _screen.screen_one(z, w, A, C, y, None, 11, M, K, N, UNITS)
    assert got[1] == ref[1] and got[3] == ref[3]  # max |z - w| in float64: exact either way
    assert ref[1] == np.max(np.abs(z.astype(np.float64) - w))
    assert got[2] == pytest.approx(ref[2], rel=1e-5)  # float64 vs float32 sums of squares


def test_order_statistics_are_exact_with_ties_and_a_nan():
    rng = np.random.default_rng(0)
    d = np.round(rng.random(500), 2)  # many ties
    buf = np.empty(1000)
    blk = np.ones((4, 8), np.float32)
    st = fastc.screen_stats(d, None, 1, buf, 250, 450, blk, 0, blk, 0, d, 1, 0)
    part = np.partition(d, (250, 450))
    assert (st[0], st[1], st[2]) == (d.max(), part[250], part[450])
    assert np.array_equal(buf[:500], d)  # the residual itself is left in order
    assert st[3] == st[4] == 32.0 and st[5] == pytest.approx(float(d @ d))
    d[7] = np.nan
    assert math.isnan(fastc.screen_stats(d, None, 1, buf, 250, 450, blk, 0, blk, 0, d, 1, 0)[0])
    d[7] = np.inf
    assert fastc.screen_stats(d, None, 1, buf, 250, 450, blk, 0, blk, 0, d, 1, 0)[0] == np.inf


@pytest.mark.parametrize("M", [1, 2, 3, 7, 8, 9, 17, 128, 511, 512, 1023, 1024, 1025, 2000])
@pytest.mark.parametrize("kind", ["distinct", "ties", "zeros", "equal", "sorted", "tiny"])
def test_order_statistics_are_numpys_at_every_size(M, kind):
    """Up to 1024 values the statistics are selected without data-dependent branches, past
    it in place by quickselect: both give numpy's order statistics, whatever the ties."""
    rng = np.random.default_rng(M)
    buf = np.empty(2 * M)
    blk = np.ones((1, 8), np.float32)
    for trial in range(20):
        d = rng.random(M)
        if kind == "ties":
            d = np.round(d, 1)
        elif kind == "zeros":
            d[rng.random(M) < 0.7] = 0.0
        elif kind == "equal":
            d[:] = 0.25
        elif kind == "sorted":
            d = np.sort(d)[::-1].copy() if trial % 2 else np.sort(d)
        elif kind == "tiny":
            d = d * 1e-310  # (subnormals)
        ks = sorted({0, M // 2, (9 * M) // 10, M - 1, int(rng.integers(M))})
        for k, k9 in zip(ks, ks[1:] + [-1]):
            st = fastc.screen_stats(d, None, 1, buf, k, k9, blk, 0, blk, 0, d[:8], 1, 0)
            part = np.sort(d)
            assert st[0] == d.max() and st[1] == part[k]
            assert (st[2] == part[k9]) if k9 >= 0 else math.isnan(st[2])


def test_16bit_blocks_are_read_exactly():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 37)).astype(np.float32)
    for dt, kind in ((ml_dtypes.bfloat16, 2), (np.float16, 3)):
        b = x.astype(dt)
        b[0, 0], b[0, 1] = dt(6e-8) if dt is np.float16 else dt(1e-39), dt(-0.0)
        buf = np.empty(8)
        st = fastc.screen_stats(np.zeros(4), None, 1, buf, 2, -1, b.view(np.uint16), kind,
                                b.view(np.uint16), kind, np.zeros(4), 1, 0)
        ref = float(np.sum(b.astype(np.float64) ** 2))
        assert st[3] == pytest.approx(ref, rel=1e-15) and st[4] == st[3]


@pytest.mark.parametrize("cols", [64, 95, 1000, 4099])
@pytest.mark.parametrize("dt,kind", [(np.float32, 0), (np.float64, 1),
                                     (ml_dtypes.bfloat16, 2), (np.float16, 3)])
def test_long_rows_sums_of_squares_are_float64_sums(cols, dt, kind):
    """The vector loops (four accumulators, each element widened and squared exactly) and
    their tails: float64 sums of the exact squares, subnormals included, up to the order of
    the additions; the largest row where every row is read."""
    rng = np.random.default_rng(cols + kind)
    x = (rng.standard_normal((5, cols)) * 10.0 ** rng.integers(-3, 3, (5, cols))).astype(dt)
    x[1, :7] = 0
    x[2, 3] = dt(1e-40) if dt is not np.float16 else dt(6e-8)  # a subnormal
    bits = x.view(np.uint16) if kind >= 2 else x
    buf = np.empty(10)
    st = fastc.screen_stats(np.zeros(5), None, 1, buf, 2, -1, bits, kind, bits, kind,
                            np.zeros(4), 1, 0)
    sq = x.astype(np.float64) ** 2
    assert st[3] == pytest.approx(float(sq.sum()), rel=1e-13) and st[4] == st[3]
    st = fastc.screen_stats(np.zeros(5), None, 1, buf, 2, -1, bits, kind, bits, kind,
                            np.zeros(4), 1, 5)  # every row: the largest row's sum
    assert st[3] == pytest.approx(float(sq.sum(axis=1).max()), rel=1e-13)


ISAS = [0, 1, 2]  # plain C, AVX2 with FMA, AVX-512 (each at most what the CPU has)


@pytest.mark.parametrize("shape", [(1, 1), (3, 2), (4, 31), (5, 32), (9, 33), (13, 70),
                                   (17, 64), (1, 4097), (130, 1000), (7, 0), (0, 9)])
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dt", [ml_dtypes.bfloat16, np.float16])
def test_16bit_gemv_is_float32_accurate(shape, isa, dt):
    """out = X v for bfloat16 / float16 X: within float32 accumulation's bound of the
    float64 product, for every row count (bfloat16's eight-row blocks, four-row blocks and
    their rest) and K (pairs, the vector loop's rest, an odd last column), with each
    instruction set (float16: subnormals and the largest finite value too)."""
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    scale = 10.0 ** rng.integers(-3, 4, shape) if dt is not np.float16 else 1.0
    X = (rng.standard_normal(shape) * scale).astype(dt)
    if dt is np.float16 and X.size >= 3:
        X.flat[0], X.flat[1], X.flat[2] = 6e-8, -3e-5, 65504.0  # subnormals, the largest
    for v in (np.where(rng.random(shape[1]) < 0.5, -1.0, 1.0).astype(np.float32),
              (rng.standard_normal(shape[1]) * 100).astype(np.float32)):
        out = np.full(shape[0], np.nan, dtype=np.float32)
        used = fastc.gemv16(X.view(np.uint16), v, out, isa, dt is np.float16)
        assert 0 <= used <= isa
        X64 = X.astype(np.float64)
        ref = X64 @ v.astype(np.float64)
        bound = (shape[1] + 1) * 2.0 ** -24 * (np.abs(X64) @ np.abs(v.astype(np.float64)))
        assert np.all(np.abs(out - ref) <= bound)


@pytest.mark.parametrize("isa", ISAS)
def test_bf16_gemv_reads_row_slices_and_unaligned_starts(isa):
    rng = np.random.default_rng(9)
    X = rng.standard_normal((40, 101)).astype(ml_dtypes.bfloat16)
    for sub in (X[:, :64], X[:, 1:], X[3:, 5:70], X[::2]):
        v = rng.standard_normal(sub.shape[1]).astype(np.float32)
        out = np.empty(sub.shape[0], dtype=np.float32)
        fastc.gemv16(sub.view(np.uint16), v, out, isa)
        ref = sub.astype(np.float64) @ v.astype(np.float64)
        assert np.allclose(out, ref, rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError):  # strided columns are not rows
        fastc.gemv16(X[:, ::2].view(np.uint16), np.ones(51, np.float32),
                     np.empty(40, np.float32))
    with pytest.raises(ValueError):  # v of the wrong length
        fastc.gemv16(X.view(np.uint16), np.ones(100, np.float32), np.empty(40, np.float32))


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("shape", [(1, 64), (1, 1000), (8, 32), (13, 96), (40, 512), (9, 33),
                                   (1, 4097), (17, 1024), (5, 47)])
def test_bf16_gemv_gives_the_same_bits_wherever_the_rows_start(shape, isa):
    """The kernel reads rows that start within a cache line a line at a time (masked first
    and last lines, the lanes put back before they are summed): every row's sum is the
    same to the bit at each 2-byte start within a line, for row lengths that keep every
    row at one start (multiples of 32) and lengths that do not."""
    M, K = shape
    rng = np.random.default_rng(M * 7919 + K)
    X0 = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(
        ml_dtypes.bfloat16)
    v = (rng.standard_normal(K) * 100).astype(np.float32)
    outs = []
    for off in range(0, 64, 2):
        buf = np.zeros(M * K * 2 + 128, np.uint8)
        at = (-buf.ctypes.data) % 64 + off
        X = buf[at: at + M * K * 2].view(np.uint16).reshape(M, K)
        X[:] = X0.view(np.uint16)
        o = np.full(M, np.nan, np.float32)
        fastc.gemv16(X, v, o, isa)
        outs.append(o.view(np.uint32))
    for off, o in zip(range(0, 64, 2), outs):
        assert np.array_equal(o, outs[0]), f"rows {off} bytes into a line"
    ref = X0.astype(np.float64) @ v.astype(np.float64)
    bound = (K + 1) * 2.0 ** -24 * (np.abs(X0.astype(np.float64)) @ np.abs(v.astype(np.float64)))
    assert np.all(np.abs(outs[0].view(np.float32) - ref) <= bound)


@pytest.mark.parametrize("dt", [ml_dtypes.bfloat16, np.float16])
def test_16bit_gemv_instruction_sets_agree_to_rounding(dt):
    rng = np.random.default_rng(10)
    X = rng.standard_normal((64, 2049)).astype(dt)
    v = rng.standard_normal(2049).astype(np.float32)
    outs = []
    for isa in ISAS:
        o = np.empty(64, np.float32)
        fastc.gemv16(X.view(np.uint16), v, o, isa, dt is np.float16)
        outs.append(o)
    for o in outs[1:]:
        assert np.allclose(o, outs[0], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dt", [ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("M", [8, 37, 130, 1024, 1027])
def test_16bit_gemv_on_torchs_threads_is_the_serial_kernel_bit_for_bit(M, dt):
    """The 16-bit kernel on torch's OpenMP threads (rows split in blocks of four) gives each
    row the serial kernel's sum exactly, for row counts that do and do not divide among the
    threads; small products stay on the calling thread."""
    torch = pytest.importorskip("torch")
    from kcontract.freivalds import _cblas

    assert _cblas.torch_pool(), "torch's OpenMP runtime was not found"
    rng = np.random.default_rng(M)
    K = max(129, (1 << 17) // M + 3)  # above the pool's threshold, an odd K
    X = rng.standard_normal((M, K)).astype(dt)
    v = rng.standard_normal(K).astype(np.float32)
    outs = []
    for pool in (0, 1):
        o = np.full(M, np.nan, np.float32)
        fastc.gemv16(X.view(np.uint16), v, o, -1, dt is np.float16, pool)
        outs.append(o)
    assert np.array_equal(outs[0], outs[1])
    old = torch.get_num_threads()
    try:  # one thread, and more threads than blocks of four rows
        for n in (1, 3):
            torch.set_num_threads(n)
            o = np.full(M, np.nan, np.float32)
            fastc.gemv16(X.view(np.uint16), v, o, -1, dt is np.float16, 1)
            assert np.array_equal(o, outs[0])
    finally:
        torch.set_num_threads(old)


def _numpy_openblas() -> bool:
    """Whether numpy's BLAS is an OpenBLAS threadpoolctl can limit."""
    from threadpoolctl import threadpool_info

    return any(i.get("internal_api") == "openblas" for i in threadpool_info())


@pytest.mark.parametrize("dt", [ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("M", [8, 37, 130, 1024, 1027])
def test_16bit_gemv_on_numpys_openblas_threads_is_the_serial_kernel_bit_for_bit(M, dt):
    """The 16-bit kernel handed to numpy's OpenBLAS threads (gotoblas_pthread, rows split
    in blocks of four): each row gets the serial kernel's sum exactly, for row counts that
    do and do not divide among the threads; with two or three threads some shares do run
    on OpenBLAS's threads, with one none do."""
    from threadpoolctl import threadpool_limits

    from kcontract.freivalds import _cblas

    if not _numpy_openblas():
        pytest.skip("numpy's BLAS is not an OpenBLAS")
    assert _cblas.blas_pool(), "numpy's OpenBLAS has no gotoblas_pthread"
    rng = np.random.default_rng(M + 7)
    K = max(129, (1 << 17) // M + 3)  # above the pool's threshold, an odd K
    X = rng.standard_normal((M, K)).astype(dt)
    v = rng.standard_normal(K).astype(np.float32)
    serial = np.full(M, np.nan, np.float32)
    fastc.gemv16(X.view(np.uint16), v, serial, -1, dt is np.float16, 0)
    for n in (1, 2, 3):
        with threadpool_limits(limits=n, user_api="blas"):
            before = fastc.blas_shares()
            o = np.full(M, np.nan, np.float32)
            fastc.gemv16(X.view(np.uint16), v, o, -1, dt is np.float16, 2)
        assert np.array_equal(o, serial)
        ran = fastc.blas_shares() - before
        assert ran == 0 if n == 1 else ran >= 1


def test_a_bfloat16_check_of_numpy_arrays_decides_alike_with_and_without_openblas_threads(
        monkeypatch):
    """verify on bfloat16 / float16 numpy arrays (the common call and the general path's
    products): the same statistics whether the 16-bit products run on numpy's OpenBLAS
    threads or the calling thread, and the OpenBLAS threads are used where registered."""
    from kcontract.freivalds import _cblas, _core

    if not _numpy_openblas():
        pytest.skip("numpy's BLAS is not an OpenBLAS")
    rng = np.random.default_rng(4)
    for dt in (ml_dtypes.bfloat16, np.float16):
        A = rng.standard_normal((600, 512)).astype(dt)
        B = rng.standard_normal((512, 400)).astype(dt)
        C = A.astype(np.float32) @ B.astype(np.float32)
        bad = C.copy()
        bad[17, 5] += 1e-3 * float(np.abs(C).max())
        runs = []
        half = 1 if dt is ml_dtypes.bfloat16 else 2
        for pool in (True, False):
            monkeypatch.setattr(_cblas, "_BLAS_POOL", None if pool else False)
            # the shape's plan registered anew (a plan keeps the threads it was made with)
            assert _core._common_plan(600, 512, 400, 2, half, 4, 0)
            before = fastc.blas_shares()
            runs.append([verify(A, B, X, seed=11) for X in (C, bad)]
                        + [verify(A[None], B, C[None], seed=5)])  # a batch: general path
            assert (fastc.blas_shares() > before) == pool
        for a, b in zip(*runs):
            assert (a.passed, a.ratio, a.screen_ratio, a.suspect_elements) == \
                (b.passed, b.ratio, b.screen_ratio, b.suspect_elements)
        assert runs[0][0].passed and not runs[0][1].passed and runs[0][2].passed
        assert runs[0][1].suspect_elements == [(17, 5)]


def test_16bit_products_on_openblas_threads_from_several_threads_at_once():
    """Checks of bfloat16 numpy products made from four Python threads at once (each
    handing its products to OpenBLAS's threads, the GIL released) while another thread
    runs numpy's own products on them: every check gets the ratio the same check made
    alone gets, a wrong product is still caught, and nothing waits forever."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(12)
    A = rng.standard_normal((512, 384)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((384, 640)).astype(ml_dtypes.bfloat16)
    C = A.astype(np.float32) @ B.astype(np.float32)
    bad = C.copy()
    bad[100, 9] += 1e-3 * float(np.abs(C).max())
    alone = {s: verify(A, B, C, seed=s).ratio for s in range(8)}

    def run(s):
        return verify(A, B, C, seed=s).ratio, verify(A, B, bad, seed=s).passed

    X = rng.standard_normal((400, 400)).astype(np.float32)
    done = threading.Event()
    products = []

    def numpy_products():
        while not done.is_set():
            products.append(float((X @ X)[0, 0]))

    beside = threading.Thread(target=numpy_products, daemon=True)
    beside.start()
    try:
        with ThreadPoolExecutor(4) as ex:
            got = list(ex.map(run, list(range(8)) * 4))
    finally:
        done.set()
        beside.join(timeout=60)
    assert not beside.is_alive() and products
    assert [g[0] for g in got] == [alone[s] for s in list(range(8)) * 4]
    assert not any(g[1] for g in got)


def test_a_bfloat16_check_of_cpu_tensors_decides_alike_with_and_without_torchs_threads(
        monkeypatch):
    """verify's common call and the guard's linear check on bfloat16 tensors: the same
    statistics whether the 16-bit products run on torch's threads or the calling thread."""
    torch = pytest.importorskip("torch")
    from kcontract.freivalds import _cblas

    g = torch.Generator().manual_seed(3)
    A = torch.randn(300, 512, generator=g).bfloat16()
    B = torch.randn(512, 400, generator=g).bfloat16()
    C = A.float() @ B.float()  # bfloat16 operands, float32 accumulation and output
    bad = C.clone()
    bad[17, 5] += 1e-3 * float(C.abs().max())
    runs = []
    for pool in (True, False):
        monkeypatch.setattr(_cblas, "_POOL", pool and _cblas.torch_pool())
        runs.append([verify(A, B, X, seed=11) for X in (C, bad)])
    for a, b in zip(*runs):
        assert (a.passed, a.ratio, a.screen_ratio, a.suspect_elements) == \
            (b.passed, b.ratio, b.screen_ratio, b.suspect_elements)
    assert runs[0][0].passed and not runs[0][1].passed
    assert runs[0][1].suspect_elements == [(17, 5)]


@pytest.mark.parametrize("missing", ["blas", "mkl", "helper"])
def test_each_compiled_piece_missing_falls_back_to_the_same_decisions(monkeypatch, missing):
    """Where numpy's BLAS symbol, MKL or the helper module is not found (another build of
    numpy or torch, no compiler), the common call takes the numpy arithmetic: the same
    verdicts, the same faults located."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    A = rng.standard_normal((256, 192)).astype(np.float32)
    B = rng.standard_normal((192, 160)).astype(np.float32)
    C = A @ B
    bad = C.copy()
    bad[40, 7] += 1e-3 * float(np.abs(C).max())
    Ab = torch.from_numpy(A).to(torch.bfloat16)
    Bb = torch.from_numpy(B).to(torch.bfloat16)
    Cb = (Ab.float() @ Bb.float()).to(torch.bfloat16)
    cases = [(A, B, C), (A, B, bad), (torch.from_numpy(A), torch.from_numpy(B),
                                      torch.from_numpy(C)), (Ab, Bb, Cb)]
    ref = [verify(*x, seed=4) for x in cases]
    from kcontract.freivalds import _cblas
    if missing == "blas":
        monkeypatch.setattr(_cblas, "gemv", lambda: {})
        monkeypatch.setattr(_cblas, "mkl_gemv", lambda: {})
    elif missing == "mkl":
        monkeypatch.setattr(_mkl, "addresses", lambda: {})
        monkeypatch.setattr(_mkl, "_FUNCS", {})
    else:
        monkeypatch.setattr(_screen, "_fastc", None)
        monkeypatch.setattr(_backend, "_fastc", None)
        monkeypatch.setattr(_core, "_fastc", None)
    got = [verify(*x, seed=4) for x in cases]
    for i, (r, g) in enumerate(zip(ref, got)):
        assert r.passed == g.passed and r.suspect_elements == g.suspect_elements
        # the same products: only the sums of squares' precision differs; without the
        # helper, bfloat16 is MKL's product and float32 the BLAS's gemv (with it, the row
        # kernel's: _fastc.own_gemv), other float32 roundings: the calibrated noise scale
        # (read off the residual) moves with them
        rel = 5e-2 if missing == "helper" else 1e-5
        assert float(r.threshold) == pytest.approx(float(g.threshold), rel=rel)
    assert [r.passed for r in got] == [True, False, True, True]
    assert got[1].suspect_elements == [(40, 7)]


def test_the_cpu_tensor_gemv_is_torch_mv_bit_for_bit():
    """The compiled stage 1 calls MKL's sgemv_/dgemv_ directly for CPU tensors: the numbers
    torch.mv gives (what docs/freivalds.md states)."""
    torch = pytest.importorskip("torch")
    from kcontract.freivalds._backend import _cpu_gemv
    from kcontract.freivalds import _cblas
    if not _cblas.mkl_gemv():
        pytest.skip("no MKL gemv in this torch build")
    g = torch.Generator().manual_seed(0)
    for shape in ((1, 4096), (16, 384), (512, 512), (300, 1152), (2048, 2048)):
        for dt in (torch.float32, torch.float64):
            X = torch.randn(*shape, generator=g, dtype=dt)
            v = torch.randn(shape[1], generator=g, dtype=dt)
            z = _cpu_gemv(X, v)
            assert z is not None and torch.equal(z, torch.mv(X, v)), (shape, dt)


FEW = pytest.mark.skipif(not getattr(fastc, "FEW_ROWS_KERNEL", 0),
                         reason="the few-row float32 kernel needs AVX-512")


@FEW
@pytest.mark.parametrize("K", [1, 31, 63, 64, 65, 96, 1000, 4099])
@pytest.mark.parametrize("M", [1, 2, 3, 16, 63, 64, 129, 700])
def test_the_row_kernel_is_float32_accurate(M, K):
    """rows_dot (the compiled stage 1's kernel for float32 products): within float32
    accumulation's bound of the float64 product, for odd and even row counts (eights,
    pairs and their rest) and K below, at and around the vector loop's bounds."""
    rng = np.random.default_rng(M * 10000 + K)
    X = (rng.standard_normal((M, K)) * 10.0 ** rng.integers(-3, 4, (M, K))).astype(np.float32)
    for v in (np.where(rng.random(K) < 0.5, -1.0, 1.0).astype(np.float32),
              (rng.standard_normal(K) * 100).astype(np.float32)):
        out = np.full(M, np.nan, dtype=np.float32)
        assert fastc.rows_dot(X, v, out) is True
        X64, v64 = X.astype(np.float64), v.astype(np.float64)
        bound = (K + 1) * 2.0 ** -24 * (np.abs(X64) @ np.abs(v64))
        assert np.all(np.abs(out - X64 @ v64) <= bound)


@FEW
@pytest.mark.parametrize("M,K", [(8, 0), (37, 0), (64, 0), (700, 300), (129, 4099),
                                 (1200, 437)])
def test_the_row_kernel_is_the_same_on_every_pool(M, K):
    """Rows split over torch's OpenMP threads or numpy's OpenBLAS threads (few rows in
    pairs, many in eights): each row gets the serial kernel's sum exactly."""
    pytest.importorskip("torch")
    from kcontract.freivalds import _cblas

    rng = np.random.default_rng(M + K)
    K = K or (1 << 17) // M + 5  # (few rows: above the pools' threshold)
    X = rng.standard_normal((M, K)).astype(np.float32)
    v = rng.standard_normal(K).astype(np.float32)
    outs = []
    for pool in (0, 1 if _cblas.torch_pool() else 0, 2 if _cblas.blas_pool() else 0):
        o = np.full(M, np.nan, np.float32)
        assert fastc.rows_dot(X, v, o, pool)
        outs.append(o)
    for o in outs[1:]:
        assert np.array_equal(o, outs[0])


@FEW
def test_the_row_kernel_makes_every_float32_product_of_a_check():
    """own_gemv: every float32 product X v of a check is the row kernel's where it runs
    (measured faster than numpy's OpenBLAS and torch's MKL gemv at every size); never
    an empty one."""
    assert fastc.own_gemv(512, 512) and fastc.own_gemv(4096, 4096)
    assert fastc.own_gemv(14336, 4096) and fastc.own_gemv(1, 70)
    assert not fastc.own_gemv(0, 64) and not fastc.own_gemv(64, 0)


@pytest.mark.parametrize("M,K,N", [(300, 200, 250), (96, 700, 72), (720, 730, 700),
                                   (800, 700, 600)])
def test_the_compiled_call_and_the_general_path_make_the_same_float32_products(M, K, N):
    """The compiled common call and the general path compute the same residual -- the same
    threshold and ratio to the bit -- for numpy arrays and CPU tensors, float32 operands
    and bfloat16 ones with a float32 C (its C r a float32 product too), an honest product
    and one with a fault (located alike), few rows and many (the row kernel's products
    where own_gemv holds, the BLAS's elsewhere)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(M + K + N)
    for dt in (np.float32, ml_dtypes.bfloat16):
        A = rng.standard_normal((M, K)).astype(dt)
        B = rng.standard_normal((K, N)).astype(dt)
        C = A.astype(np.float32) @ B.astype(np.float32)
        bad = C.copy()
        bad[M // 3, N // 2] += 1e-3 * float(np.abs(C).max())
        _decide_alike(torch, A, B, C, bad)


def _decide_alike(torch, A, B, C, bad):
    def tensor(x):
        return torch.from_numpy(x) if x.dtype == np.float32 else \
            torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    for X in (C, bad):
        for a, b, c in ((A, B, X), (tensor(A), tensor(B), tensor(X))):
            fast = verify(a, b, c, seed=21)
            general = verify(a, b, c, seed=21, accumulate="float32")  # (not the common call)
            assert (fast.passed, fast.ratio, fast.screen_ratio, fast.suspect_elements) == \
                (general.passed, general.ratio, general.screen_ratio,
                 general.suspect_elements), (type(a), X is bad)
            assert np.array_equal(fast.threshold, general.threshold)
            assert fast.passed is (X is C)


@FEW
def test_the_few_row_kernel_takes_only_native_float32_rows():
    X = np.ones((4, 70), np.float32)
    v, out = np.ones(70, np.float32), np.empty(4, np.float32)
    for bad in (X.astype(np.float64), X.astype(">f4"), X[:, ::2], X.astype(np.int32)):
        with pytest.raises(ValueError):
            fastc.rows_dot(bad, np.ones(bad.shape[1], np.float32), out)
    with pytest.raises(ValueError):  # v of the wrong length
        fastc.rows_dot(X, np.ones(69, np.float32), out)
    with pytest.raises(ValueError):  # out of the wrong length
        fastc.rows_dot(X, v, np.empty(5, np.float32))


_BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("op,out", [(np.float32, np.float32), (_BF16, _BF16),
                                    (_BF16, np.float32), (np.float16, np.float16),
                                    (np.float16, np.float32)])
@pytest.mark.parametrize("M", [1, 2, 17, 64, 65])
def test_few_row_products_decide_alike_on_every_path(monkeypatch, lib, op, out, M):
    """A product of at most 64 rows: the compiled common call and the shortcut's compiled
    stage 1 (each row's product and sum of squares in one pass over A and over C) and the
    general path (float32 rows by the same kernel, the screen's sums of squares apart) give
    the same screen to the bit, for several seeds, float32 and 16-bit operands, C in their
    format or float32; one wrong element is still found.  65 rows: two passes everywhere
    (and on a CPU without the few-row kernel: the BLAS and two passes on every path)."""
    rng = np.random.default_rng(M)
    A = rng.standard_normal((M, 777)).astype(op)
    B = rng.standard_normal((777, 300)).astype(op)
    C = (A.astype(np.float32) @ B.astype(np.float32)).astype(out)
    args = (A, B, C)
    if lib == "torch":
        torch = pytest.importorskip("torch")
        t_dt = {np.dtype(np.float32): torch.float32, _BF16: torch.bfloat16,
                np.dtype(np.float16): torch.float16}
        args = tuple(torch.from_numpy(x.astype(np.float32)).to(t_dt[x.dtype]) for x in args)
    for seed in (11, 12, 13):
        common = verify(*args, seed=seed)  # the compiled common call
        with monkeypatch.context() as m:
            m.setattr(_core, "_COMMON", None)
            fast = verify(*args, seed=seed)  # the shortcut's compiled stage 1
            m.setattr(_core, "_fast", lambda *a, **k: None)
            slow = verify(*args, seed=seed)  # the general path
        for res in (common, fast, slow):
            assert res.passed and res.screen_ratio == slow.screen_ratio
            assert res.ratio == slow.ratio and float(res.threshold) == float(slow.threshold)
    bad = C.copy()
    big = float(np.abs(C.astype(np.float64)).max())
    bad[M // 2, 123] += (1e-4 if out == np.float32 else 0.5) * big
    if lib == "torch":
        bad = torch.from_numpy(bad.astype(np.float32)).to(t_dt[bad.dtype])
    res = verify(args[0], args[1], bad, seed=11)
    assert not res.passed and (M // 2, 123) in res.suspect_elements


def test_a_pool_is_registered_from_the_first_library_with_every_symbol():
    """_cblas._register_first: alternatives tried in order, a library lacking a symbol
    skipped, a registration that refuses counted as none."""
    import ctypes

    from kcontract.freivalds import _cblas

    paths = _cblas._numpy_blas_paths()
    if not paths:
        pytest.skip("numpy's BLAS is not a bundled library")
    lib = ctypes.CDLL(paths[0])
    names = [n for n in ("cblas_sgemv", "scipy_cblas_sgemv64_", "cblas_sgemv64_",
                         "scipy_cblas_sgemv") if hasattr(lib, n)]
    if not names:
        pytest.skip("no CBLAS sgemv in numpy's BLAS")
    want = ctypes.cast(getattr(lib, names[0]), ctypes.c_void_p).value
    seen = []
    assert _cblas._register_first(paths[:1], (("no_such_symbol", names[0]),),
                                  lambda a: seen.append(a) or True)
    assert seen == [want]
    seen.clear()
    assert not _cblas._register_first(paths, (names[0], "no_such_symbol"),
                                      lambda *a: seen.append(a) or True)
    assert not seen
    assert not _cblas._register_first(paths[:1], (names[0],), lambda a: seen.append(a) or False)
    assert seen == [want]
