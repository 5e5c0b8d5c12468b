import math

import ml_dtypes
import numpy as np
import pytest

from kcontract import formats as F
from kcontract.errors import UsageError


@pytest.mark.parametrize("name,p,maxval", [
    ("float64", 53, np.finfo(np.float64).max), ("float32", 24, np.finfo(np.float32).max),
    ("float16", 11, 65504.0), ("bfloat16", 8, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
    ("float8_e4m3fn", 4, 448.0), ("float8_e5m2", 3, 57344.0)])
def test_facts_match_the_storage_types(name, p, maxval):
    f = F.get_format(name)
    assert f.precision == p
    assert f.u == 2.0 ** -p and f.eps == 2.0 ** (1 - p)
    assert f.max == maxval
    fi = ml_dtypes.finfo(f.storage) if f.storage not in (np.float64, np.float32, np.float16) \
        else np.finfo(f.storage)
    assert f.eps == float(fi.eps)
    assert f.tiny == float(fi.smallest_normal)
    assert f.smallest_subnormal == float(fi.smallest_subnormal)


def test_aliases_and_typos():
    assert F.get_format("bf16").name == "bfloat16"
    assert F.get_format(np.float16).name == "float16"
    with pytest.raises(UsageError, match="did you mean bfloat16"):
        F.get_format("bfloat61")


@pytest.mark.parametrize("fmt", ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_round_to_is_rne_and_matches_native_cast(fmt):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(10000) * 4
    f = F.get_format(fmt)
    got = F.round_to(x, fmt)
    assert np.array_equal(got, x.astype(f.storage).astype(np.float64))
    # ties go to even: 1 + u is halfway between 1 and 1 + eps
    assert F.round_to(np.array([1 + f.u]), fmt)[0] == 1.0
    assert F.round_to(np.array([1 + 3 * f.u]), fmt)[0] == 1 + 4 * f.u


def test_tf32_emulation():
    x = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -10, 3e-30, np.inf, np.nan])
    r = F.round_to(x, "tfloat32")
    assert r[0] == 1.0  # tie to even
    assert r[1] == 1 + 2 * 2.0 ** -10
    assert r[2] == 1 + 2.0 ** -10
    assert r[3] != 0 and abs(r[3] - 3e-30) / 3e-30 < 2.0 ** -11  # fp32 range
    assert np.isinf(r[4]) and np.isnan(r[5])


def test_overflow_and_saturation():
    x = np.array([1e6, -1e6])
    assert np.all(np.isinf(F.round_to(x, "float16")))
    assert np.all(np.isnan(F.round_to(x, "float8_e4m3fn")))  # OCP e4m3fn has no inf
    assert list(F.round_to(x, "float8_e4m3fn", saturate=True)) == [448.0, -448.0]


def test_ulp_gamma_and_subnormals():
    assert F.ulp(np.array([1.0]), "float32")[0] == 2.0 ** -23
    assert F.ulp(np.array([1e-45]), "float32")[0] == 2.0 ** -149
    assert math.isclose(float(F.gamma(10, 2.0 ** -24)), 10 * 2.0 ** -24 / (1 - 10 * 2.0 ** -24))
    assert np.isinf(F.gamma(2 ** 25, 2.0 ** -24))
    assert F.is_subnormal(np.array([1e-40, 1e-30]), "float32").tolist() == [True, False]
    assert F.representable(np.array([0.5, 0.1]), "float16").tolist() == [True, False]


def test_ulp_of_zero_is_the_smallest_subnormal():
    assert F.ulp(np.array([0.0]), "float32")[0] == 2.0 ** -149
    assert F.ulp(np.array([0.0]), "float16")[0] == 2.0 ** -24
