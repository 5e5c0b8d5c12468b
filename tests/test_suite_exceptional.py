"""The exceptional-values family (C-EXC-01..02): calibration, signatures, case study.

The module-level kernels below are loaded by the checker from this file
(``<this file>:<function>``); they stand for the behaviours real stacks show.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from kcontract.check.runner import check
from kcontract.classes.exceptional import (classify_rows, describe_side, oob_values,
                                           policy_reference, value_class)
from kcontract.language.loader import load_contracts
from kcontract.ops import get_op
from kcontract.suite import CONTRACTS_DIR

import newops_contracts
from suite_helpers import assert_soundly_calibrated, run_one as run_suite_contract

ROOT = Path(__file__).resolve().parents[1]
EXC_IDS = sorted(p.stem for p in CONTRACTS_DIR.glob("exc*.yaml"))
HERE = str(Path(__file__).resolve())


def contract(cid: str):
    return load_contracts(str(CONTRACTS_DIR / f"{cid}.yaml"))[0]


def run_one(cid: str, fn: str, dtype: str = "float32", **kw):
    """``fn``, a kernel defined in this file, against the contract ``cid``."""
    return run_suite_contract(cid, f"{HERE}:{fn}", dtype, **kw)


# -- kernels: C-EXC-01 --------------------------------------------------------------------------

def _f32(x):
    return x.astype(np.float32)


def sum_propagate(x):
    with np.errstate(all="ignore"):
        return np.sum(_f32(x), axis=-1).astype(x.dtype)


def sum_nan_as_inf(x):
    """Reports every NaN result as +Inf (a status-word style "invalid -> overflow")."""
    s = sum_propagate(x)
    return np.where(np.isnan(s), np.asarray(np.inf, dtype=s.dtype), s)


def sum_inf_as_nan(x):
    """Turns every infinite result into NaN (as stacks that give NaN where others Inf)."""
    s = sum_propagate(x)
    return np.where(np.isinf(s), np.asarray(np.nan, dtype=s.dtype), s)


def sum_mask(x):
    with np.errstate(all="ignore"):
        return np.sum(np.where(np.isfinite(x), _f32(x), 0), axis=-1).astype(x.dtype)


def sum_raise(x):
    if not np.all(np.isfinite(x)):
        raise FloatingPointError("non-finite input to sum")
    return sum_propagate(x)


def sum_raise_crash(x):
    if not np.all(np.isfinite(x)):
        os._exit(3)
    return sum_propagate(x)


def sum_saturate(x):
    s = sum_propagate(x)
    m = np.finfo(s.dtype).max
    return np.where(np.isinf(s), np.sign(s) * m, s).astype(s.dtype)


def _softmax(xf):
    with np.errstate(all="ignore"):
        m = np.max(xf, axis=-1, keepdims=True)
        e = np.exp(xf - m)
        return e / np.sum(e, axis=-1, keepdims=True)


def softmax_propagate(x):
    return _softmax(_f32(x)).astype(x.dtype)


def softmax_no_max(x):
    """exp without max subtraction: finite logits beyond ~88 overflow to Inf, Inf/Inf = NaN."""
    with np.errstate(all="ignore"):
        e = np.exp(_f32(x))
        return (e / np.sum(e, axis=-1, keepdims=True)).astype(x.dtype)


def softmax_mask(x):
    xf = np.where(np.isfinite(x), _f32(x), -np.inf).astype(np.float32)
    p = _softmax(xf)
    return np.where(np.any(np.isfinite(x), axis=-1, keepdims=True), p, 0).astype(x.dtype)


def layernorm_mask(x, weight, bias, eps=1e-5):
    xf = _f32(x)
    present = np.isfinite(xf)
    cnt = np.maximum(np.sum(present, axis=-1, keepdims=True), 1).astype(np.float32)
    with np.errstate(all="ignore"):
        mu = np.sum(np.where(present, xf, 0), axis=-1, keepdims=True) / cnt
        d = np.where(present, xf - mu, 0)
        var = np.sum(d * d, axis=-1, keepdims=True) / cnt
        y = d / np.sqrt(var + np.float32(eps)) * _f32(weight) + _f32(bias)
    return np.where(present, y, 0).astype(x.dtype)


def matmul_propagate(a, b):
    with np.errstate(all="ignore"):
        return np.matmul(_f32(a), _f32(b)).astype(a.dtype)


def matmul_saturate(a, b):
    y = matmul_propagate(a, b)
    m = np.finfo(y.dtype).max
    return np.clip(np.nan_to_num(y, nan=np.nan, posinf=m, neginf=-m), -m, m).astype(y.dtype)


def cast_propagate(x, dtype="float16"):
    with np.errstate(all="ignore"):
        return x.astype(np.dtype(getattr(ml_dtypes, dtype, None) or dtype))


def cast_saturate(x, dtype="float16"):
    t = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    m = float(ml_dtypes.finfo(t).max)
    return np.clip(x, -m, m).astype(t)


def cast_wrap(x, dtype="float16"):
    """Overflowing values wrap around the range (an integer-style wrap of the magnitude)."""
    t = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    m = float(ml_dtypes.finfo(t).max)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        wrapped = np.where(np.abs(x64) > m, np.fmod(x64, m), x64)
    return wrapped.astype(t)


def gelu_propagate(x):
    import math as _m
    erf = np.frompyfunc(_m.erf, 1, 1)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        return (0.5 * x64 * (1.0 + erf(x64 / _m.sqrt(2.0)).astype(np.float64))).astype(x.dtype)


def gelu_nan_at_inf(x):
    """NaN at +-Inf (as PyTorch's CPU gelu): the accepted alternative outcome."""
    y = gelu_propagate(x)
    return np.where(np.isinf(x), np.asarray(np.nan, dtype=y.dtype), y)


def gelu_inf_to_zero(x):
    """+Inf -> 0: not a limit of gelu there, a swallowed Inf."""
    y = gelu_propagate(x)
    return np.where(np.isposinf(x), np.asarray(0, dtype=y.dtype), y)


# -- kernels: C-EXC-02 --------------------------------------------------------------------------

def _inb(table, indices):
    return (indices >= 0) & (indices < table.shape[0])


def emb_raise(table, indices):
    if not np.all(_inb(table, indices)):
        raise IndexError("index out of range")
    return table[indices]


def emb_clamp(table, indices):
    return np.take(table, indices, axis=0, mode="clip")


def emb_wrap(table, indices):
    return np.take(table, indices, axis=0, mode="wrap")


def emb_zero(table, indices):
    ok = _inb(table, indices)
    out = table[np.where(ok, indices, 0)]
    out[~ok] = 0
    return out


def emb_garbage(table, indices):
    """Out-of-range rows read from "somewhere else": the neighbouring allocation."""
    ok = _inb(table, indices)
    out = table[np.where(ok, indices, 0)].copy()
    out[~ok] = np.float32(7.25)
    return out


def emb_python(table, indices):
    """numpy fancy indexing: -V..-1 wrap, below -V and >= V raise."""
    return table[indices]


def emb_crash(table, indices):
    if not np.all(_inb(table, indices)):
        os._exit(11)  # an unchecked read past the end: the process dies
    return table[indices]


def emb_hang(table, indices):
    if np.any(indices >= 2 ** 30):
        time.sleep(30)
    return emb_raise(table, indices)


# -- the family ----------------------------------------------------------------------------------

def test_the_family_is_complete():
    expected = {"exc01-matmul", "exc01-sum", "exc01-softmax", "exc01-layernorm", "exc01-gelu",
                "exc01-cast", "exc02-embedding"}
    assert set(EXC_IDS) == expected | newops_contracts.EXC
    for cid in EXC_IDS:
        c = contract(cid)
        assert c.id == cid and c.cls == f"C-EXC-0{cid[4]}"
        assert c.signature.detector in ("exceptional_values", "oob_behaviour")
        assert c.oracle == "policy"
        assert "tolerance" in c.description.lower()


@pytest.mark.parametrize("cid", EXC_IDS)
def test_calibration_is_sound(cid):
    assert_soundly_calibrated(cid)


# -- C-EXC-01 signatures -------------------------------------------------------------------------

def test_nan_swallowed_is_reported_with_its_position():
    res = check("kcontract.suite.kernels.exc01_matmul:bad", op="matmul", dtype="float32",
                contracts=[contract("exc01-matmul")], in_process=True).results[0]
    sig = res.signature
    assert res.verdict.value == "violation"
    assert sig["kind"] == "nan-swallowed" and sig["counts"]["nan-swallowed"] > 0
    assert "NaN swallowed: input NaN at a[" in res.message and "replaced by 0" in res.message
    # the reported output element is in the row of the reported input element
    row = int(res.message.split("input NaN at a[")[1].split(",")[0])
    assert sig["index"][0] == row


def test_softmax_uniform_guard_is_named():
    res = check("kcontract.suite.kernels.exc01_softmax:bad", op="softmax", dtype="float32",
                contracts=[contract("exc01-softmax")], in_process=True).results[0]
    assert res.verdict.value == "violation"
    assert "uniform distribution (1/64)" in res.message


def test_nansum_looks_like_masking_and_conforms_when_mask_is_declared():
    res = check("kcontract.suite.kernels.exc01_sum:bad", op="sum", dtype="float32",
                contracts=[contract("exc01-sum")], in_process=True).results[0]
    assert res.verdict.value == "violation"
    assert "nan=mask semantics" in res.message
    # nansum keeps Inf, so it is not the mask policy either
    res = check("kcontract.suite.kernels.exc01_sum:bad", op="sum", dtype="float32",
                contracts=[contract("exc01-sum")], in_process=True,
                declare={"nan": "mask"}).results[0]
    assert res.verdict.value == "violation"


@pytest.mark.parametrize("fn,kind,phrase", [
    ("sum_nan_as_inf", "inf-for-nan", "Inf where NaN is due"),
    ("sum_inf_as_nan", "nan-for-inf", "NaN where Inf is due"),
])
def test_inf_nan_confusion(fn, kind, phrase):
    res = run_one("exc01-sum", fn)
    assert res.verdict.value == "violation"
    assert res.signature["counts"].get(kind, 0) > 0
    assert phrase in res.message


def test_new_nan_on_finite_logits():
    res = run_one("exc01-softmax", "softmax_no_max")
    assert res.verdict.value == "violation"
    assert res.signature["counts"].get("spurious-nan", 0) > 0
    assert "no non-finite input" in res.message and "[overflow inputs]" in res.message


@pytest.mark.parametrize("cid,fn,dtype", [
    ("exc01-sum", "sum_propagate", "float32"), ("exc01-sum", "sum_propagate", "float16"),
    ("exc01-sum", "sum_propagate", "bfloat16"), ("exc01-matmul", "matmul_propagate", "float16"),
    ("exc01-matmul", "matmul_propagate", "bfloat16"),
    ("exc01-softmax", "softmax_propagate", "float16"),
    ("exc01-gelu", "gelu_propagate", "bfloat16"), ("exc01-gelu", "gelu_nan_at_inf", "float32"),
    ("exc01-cast", "cast_propagate", "float16"), ("exc01-cast", "cast_propagate", "bfloat16"),
    ("exc01-cast", "cast_propagate", "float8_e4m3fn"),
    ("exc01-cast", "cast_propagate", "float8_e5m2"),
])
def test_ieee_kernels_conform(cid, fn, dtype):
    res = run_one(cid, fn, dtype)
    assert res.verdict.value == "pass", res.message


def test_gelu_inf_to_zero_is_swallowed():
    res = run_one("exc01-gelu", "gelu_inf_to_zero")
    assert res.verdict.value == "violation"
    assert res.signature["counts"].get("inf-swallowed", 0) > 0


# -- overflow -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,declared,verdict,observed", [
    ("cast_saturate", None, "violation", "saturate"),
    ("cast_saturate", "saturate", "pass", None),
    ("cast_propagate", "saturate", "violation", "inf"),
    ("cast_propagate", None, "pass", None),
    ("cast_wrap", None, "violation", "garbage"),
    ("cast_propagate", "nan", "violation", "inf"),
])
def test_cast_overflow_behaviour(fn, declared, verdict, observed):
    declare = {"overflow": declared} if declared else {}
    res = run_one("exc01-cast", fn, "float16", declare=declare)
    assert res.verdict.value == verdict, res.message
    if observed:
        seen = res.signature["overflow_observed"]
        assert max(seen, key=seen.get) == observed
        assert res.signature["overflow_declared"] == (declared or "inf")
        assert f"declared {declared or 'inf'}, observed" in res.message


def test_fp8_e4m3fn_default_overflow_is_nan():
    res = run_one("exc01-cast", "cast_saturate", "float8_e4m3fn")
    assert res.verdict.value == "violation"
    assert res.signature["overflow_declared"] == "nan"
    assert "observed saturate" in res.message
    res = run_one("exc01-cast", "cast_saturate", "float8_e4m3fn", declare={"overflow": "saturate"})
    assert res.verdict.value == "pass", res.message


@pytest.mark.parametrize("cid,fn", [("exc01-sum", "sum_saturate"),
                                    ("exc01-matmul", "matmul_saturate")])
def test_result_overflow_saturating_where_inf_is_declared(cid, fn):
    res = run_one(cid, fn)
    assert res.verdict.value == "violation"
    assert res.signature["kind"] == "overflow"
    assert res.signature["overflow_observed"].get("saturate", 0) > 0
    assert run_one(cid, fn.replace("saturate", "propagate")).verdict.value == "pass"


def test_saturate_declared_sum_conforms():
    res = run_one("exc01-sum", "sum_saturate", declare={"overflow": "saturate"})
    assert res.verdict.value == "pass", res.message


# -- mask and raise -----------------------------------------------------------------------------

@pytest.mark.parametrize("cid,fn", [("exc01-sum", "sum_mask"), ("exc01-softmax", "softmax_mask"),
                                    ("exc01-layernorm", "layernorm_mask")])
def test_mask_policy(cid, fn):
    assert run_one(cid, fn, declare={"nan": "mask"}).verdict.value == "pass"
    res = run_one(cid, fn)  # masking kernels violate the default propagate
    assert res.verdict.value == "violation"
    assert res.signature["counts"].get("nan-swallowed", 0) > 0
    prop = fn.replace("mask", "propagate")
    if prop in globals():
        res = run_one(cid, prop, declare={"nan": "mask"})
        assert res.verdict.value == "violation"
        assert res.signature["kind"] in ("spurious-nan", "spurious-inf")


def test_policy_reference_mask_definitions():
    x = np.array([[1.0, np.nan, 2.0, np.inf], [np.nan, np.inf, -np.inf, np.nan]], np.float32)
    ref, _, _ = policy_reference(get_op("softmax"), {"x": x}, "mask")
    assert np.allclose(ref[0], [1 / (1 + math.e), 0, math.e / (1 + math.e), 0])
    assert np.all(ref[1] == 0)
    ref, _, _ = policy_reference(get_op("sum"), {"x": x}, "mask")
    assert list(ref) == [3.0, 0.0]
    w, b = np.ones(4, np.float32), np.zeros(4, np.float32)
    ref, _, q = policy_reference(get_op("layernorm"), {"x": x, "weight": w, "bias": b}, "mask")
    assert ref[0, 1] == 0 and ref[0, 3] == 0 and abs(ref[0, 0] + ref[0, 2]) < 1e-12
    assert np.all(ref[1] == 0) and np.all(np.isfinite(q["mag"]))
    a = np.array([[np.inf, 1.0]], np.float32)
    bb = np.array([[0.0], [2.0]], np.float32)
    ref, _, _ = policy_reference(get_op("matmul"), {"a": a, "b": bb}, "propagate")
    assert np.isnan(ref[0, 0])  # Inf * 0 = NaN, as IEEE says
    ref, _, _ = policy_reference(get_op("matmul"), {"a": a, "b": bb}, "mask")
    assert ref[0, 0] == 2.0
    assert list(value_class([np.nan, np.inf, -np.inf, 1.0])) == ["nan", "+inf", "-inf", "finite"]


def test_raise_policy():
    assert run_one("exc01-sum", "sum_raise", declare={"nan": "raise"}).verdict.value == "pass"
    res = run_one("exc01-sum", "sum_propagate", declare={"nan": "raise"})
    assert res.verdict.value == "violation" and res.signature["kind"] == "returned"
    assert "declared nan=raise, but the kernel returned" in res.message
    res = run_one("exc01-sum", "sum_raise")
    assert res.verdict.value == "violation" and res.signature["kind"] == "raised"
    assert "FloatingPointError" in res.message


def test_crash_on_nan_is_a_violation_under_raise():
    res = run_one("exc01-sum", "sum_raise_crash", declare={"nan": "raise"}, in_process=False)
    assert res.verdict.value == "violation" and res.signature["kind"] == "crashed"
    assert "crashed" in res.message


# -- C-EXC-02 -----------------------------------------------------------------------------------

BEHAVIOURS = {"raise": "emb_raise", "clamp": "emb_clamp", "zero": "emb_zero", "wrap": "emb_wrap",
              "garbage": "emb_garbage"}
POLICIES = ("raise", "clamp", "zero", "wrap", "undefined")


@pytest.mark.parametrize("declared", POLICIES)
@pytest.mark.parametrize("behaviour", sorted(BEHAVIOURS))
def test_oob_behaviour_against_policy(behaviour, declared):
    res = run_one("exc02-embedding", BEHAVIOURS[behaviour], declare={"oob": declared})
    conforms = behaviour == declared or declared == "undefined"
    assert res.verdict.value == ("pass" if conforms else "violation"), res.message
    if not conforms:
        sig = res.signature
        assert sig["declared"] == declared
        assert sig["above"] == behaviour and sig["below"] == behaviour
        assert res.message.startswith(f"declared {declared}, observed {behaviour} on")
        assert sig["code"] == "C-EXC-02.oob-policy"


@pytest.mark.parametrize("declared", ["raise", "wrap", "undefined"])
def test_oob_python_style(declared):
    res = run_one("exc02-embedding", "emb_python", declare={"oob": declared})
    if declared == "undefined":
        assert res.verdict.value == "pass"
        return
    assert res.verdict.value == "violation"
    assert res.signature["below"] == "wrap for -V <= i < 0, raise below -V (python-style)"
    assert res.signature["above"] == "raise"
    if declared == "raise":
        assert res.message == ("declared raise, observed wrap for -V <= i < 0, raise below -V "
                               "(python-style) on negative indices")


@pytest.mark.parametrize("declared", ["raise", "clamp", "undefined"])
def test_oob_crash_is_never_conformant(declared):
    res = run_one("exc02-embedding", "emb_crash", declare={"oob": declared}, in_process=False)
    assert res.verdict.value == "violation"
    assert res.signature["below"] == "crash" and res.signature["above"] == "crash"


def test_oob_hang_is_never_conformant():
    res = run_one("exc02-embedding", "emb_hang", declare={"oob": "undefined"}, in_process=False,
                  timeout=1.0)
    assert res.verdict.value == "violation"
    assert res.signature["per_index"][str(2 ** 31 - 1)] == "hang"
    assert "hang" in res.signature["above"]


def test_oob_classification_helpers():
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([0, -1, 5])
    assert classify_rows(table, idx, np.take(table, idx, axis=0, mode="clip")) == {"clamp"}
    assert classify_rows(table, idx, np.take(table, idx, axis=0, mode="wrap")) == {"wrap"}
    assert classify_rows(table, np.array([0, -4]), table[[0, 0]]) == {"clamp", "wrap"}
    assert classify_rows(table, idx, np.zeros((2, 3), np.float32)) == {"garbage"}
    vals = [i for _, i in oob_values(4)]
    assert vals == [-1, -4, -5, -(2 ** 31), 4, 5, 2 ** 31 - 1]
    assert describe_side([(-1, {"clamp"}), (-4, {"clamp", "wrap"})], "below", 4) == "clamp"
    assert describe_side([(-1, {"clamp"}), (-5, {"garbage"})], "below", 4) == \
        "mixed: clamp at -1, garbage at -5"


# -- case study: out-of-bounds silent acceptance -----------------------------------------------

EXAMPLE = ROOT / "examples" / "oob_acceptance"


def test_case_study_clamping_kernel_violates_the_default(run_cli, tmp_path):
    out = tmp_path / "run.json"
    code, stdout, _ = run_cli("check", f"{EXAMPLE / 'kernel.py'}:embedding_clamps",
                              "--op", "embedding", "--dtype", "float32",
                              "--contract", "C-EXC-02", "--json", str(out), "--no-store")
    assert code == 1
    data = json.loads(out.read_text())
    (r,) = data["results"]
    assert r["verdict"] == "violation" and data["claims"]["oob"] == "raise"
    assert r["signature"]["below"] == "clamp" and r["signature"]["above"] == "clamp"
    assert r["message"] == "declared raise, observed clamp on negative indices; clamp on indices >= V"


def test_case_study_clamping_kernel_conforms_when_declared(run_cli):
    code, stdout, _ = run_cli("check", f"{EXAMPLE / 'kernel.py'}:embedding_clamps",
                              "--op", "embedding", "--dtype", "float32",
                              "--contract", "C-EXC-02", "--declare", "oob=clamp", "--no-store")
    assert code == 0, stdout


def test_case_study_raising_kernel(run_cli):
    code, stdout, _ = run_cli("check", f"{EXAMPLE / 'kernel.py'}:embedding_raises",
                              "--op", "embedding", "--dtype", "float32",
                              "--contract", "C-EXC-02", "--no-store")
    assert code == 0, stdout
    code, stdout, _ = run_cli("check", f"{EXAMPLE / 'kernel.py'}:embedding_raises",
                              "--op", "embedding", "--dtype", "float32",
                              "--contract", "C-EXC-02", "--declare", "oob=clamp", "--no-store")
    assert code == 1 and "declared clamp, observed raise" in stdout
