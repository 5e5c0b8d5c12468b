"""The 16-bit matrix-vector product with a float32 result (kcontract.freivalds._mkl):
exact splitting of float32 vectors into 16-bit parts, accuracy against float64, and the
fallback where the product cannot take a matrix."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from kcontract.freivalds import _backend, _mkl, verify
from kcontract.freivalds._backend import NUMPY_OPS

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)


@pytest.mark.parametrize("dt", [BF16, F16])
def test_columns_sum_to_the_vector(dt):
    rng = np.random.default_rng(0)
    v = (rng.standard_normal(997) * 10.0 ** rng.integers(-3, 4, 997)).astype(np.float32)
    V, scale = _mkl.columns(v, dt)
    assert V.dtype == dt and V.shape == (997, 3)
    total = V.astype(np.float64).sum(axis=1) / scale
    err = np.abs(total - v.astype(np.float64))
    if dt == BF16:  # truncation splits: the three parts are the vector exactly
        assert np.array_equal(total, v.astype(np.float64))
    else:  # float16 parts of a scaled vector: 33 significant bits, below max |v|'s range
        assert np.all(err <= 2.0 ** -24 * np.abs(v) + 2.0 ** -30 * np.abs(v).max())


@pytest.mark.parametrize("dt", [BF16, F16])
def test_signs_are_one_exact_column(dt):
    r = np.where(np.random.default_rng(1).random(64) < 0.5, -1.0, 1.0).astype(np.float32)
    V, scale = _mkl.columns(r, dt)
    assert V.shape == (64, 1) and scale == 1.0
    assert np.array_equal(V[:, 0].astype(np.float32), r)


@pytest.mark.skipif(not _mkl.available(BF16), reason="no MKL mixed-precision product here")
@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.parametrize("shape", [(1, 4096), (300, 257), (64, 64)])
def test_matvec_is_float32_accurate(dt, shape):
    rng = np.random.default_rng(2)
    X = rng.standard_normal(shape).astype(dt)
    for v in (np.where(rng.random(shape[1]) < 0.5, -1, 1).astype(np.float32),
              (rng.standard_normal(shape[1]) * 100).astype(np.float32)):
        z = _mkl.matvec(X, v)
        assert z is not None and z.dtype == np.float32 and z.shape == (shape[0],)
        X64 = X.astype(np.float64)
        ref = X64 @ v.astype(np.float64)
        bound = 2 * shape[1] * 2.0 ** -24 * (np.abs(X64) @ np.abs(v.astype(np.float64)))
        assert np.all(np.abs(z - ref) <= bound)
        # the same through the backend (what the check runs) where the compiled helper is
        # missing; with it, 16-bit matrices go to its kernel (its own float32 sums, within
        # the same bound)
        zb = NUMPY_OPS.matvec(X, v, np.float32)
        if _backend._fastc is None:
            assert np.array_equal(zb, z)
        else:
            assert np.all(np.abs(zb - ref) <= bound)


@pytest.mark.skipif(not _mkl.available(BF16), reason="no MKL mixed-precision product here")
def test_matvec_declines_strided_columns_and_the_backend_widens_them():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 90)).astype(BF16)
    v = rng.standard_normal(45).astype(np.float32)
    assert _mkl.matvec(X[:, ::2], v) is None
    z = NUMPY_OPS.matvec(X[:, ::2], v, np.float32)  # the widening path
    ref = X[:, ::2].astype(np.float64) @ v.astype(np.float64)
    assert np.allclose(z, ref, rtol=1e-5, atol=1e-5)
    # a row slice keeps contiguous rows with a longer leading dimension
    assert _mkl.matvec(X[:, :45], v) is not None


@pytest.mark.parametrize("dt", [BF16, F16])
def test_16bit_products_verify_and_catch_one_element(dt):
    rng = np.random.default_rng(4)
    A = rng.standard_normal((256, 512)).astype(dt)
    B = rng.standard_normal((512, 192)).astype(dt)
    C = (A.astype(np.float32) @ B.astype(np.float32)).astype(np.float32)
    assert verify(A, B, C, seed=1).passed
    bad = C.copy()
    bad[17, 101] += 1e-3 * np.abs(C).max()
    res = verify(A, B, bad, seed=1)
    assert not res.passed and (17, 101) in res.suspect_elements
