"""The LLM-era ops (rmsnorm, rope, silu_mul, cross_entropy, scaled_matmul, conv2d,
cumsum, topk): their float64 oracles against independent float64 computations (torch
in float64, or plain loops), their calling conventions, and their contracts (each one
calibrated soundly by its family's test; here: every op has contracts and `kcontract
calibrate --op` is sound for it)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from kcontract.formats import get_format
from kcontract.ops import OPS, get_op, upcast
from kcontract.suite import load_suite

import newops_contracts

NEW_OPS = ("rmsnorm", "silu_mul", "cumsum", "rope", "topk", "cross_entropy", "scaled_matmul",
           "scaled_matmul_f32", "conv2d")
F32 = get_format("float32")


def _inputs(op, shape, family="normal", seed=0, dtype=F32):
    return upcast(op.generate(op.full_shape(shape), dtype, family, np.random.default_rng(seed)))


def _t(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def test_the_registry_has_at_least_seventeen_ops(run_cli):
    assert set(NEW_OPS) <= set(OPS)
    assert len(OPS) >= 17
    code, out, _ = run_cli("list")
    assert code == 0 and "ops" in out
    for name in OPS:
        assert f"│ {name} " in out, name


def test_every_new_op_has_contracts_and_they_are_the_listed_ones():
    ids = {c.id for c in load_suite() if c.op in NEW_OPS}
    listed = newops_contracts.PRC | newops_contracts.ORD | newops_contracts.CMP | newops_contracts.EXC
    assert ids == listed
    for op in NEW_OPS:
        # scaled_matmul_f32 is scaled_matmul with a float32 output: it needs only the
        # contract that the float32 output makes visible (the accumulator's)
        want = 1 if op == "scaled_matmul_f32" else 2
        assert len([i for i in ids if i.endswith(f"-{op}")]) >= want, op


@pytest.mark.parametrize("shape", [{"R": 3, "N": 17}, {"R": 1, "N": 1}, {"R": 4, "N": 1000}])
def test_rmsnorm_oracle_matches_torch_float64(shape):
    op = get_op("rmsnorm")
    x = _inputs(op, shape)
    want = torch.nn.functional.rms_norm(_t(x["x"]), (shape["N"],), _t(x["weight"]), 1e-6)
    np.testing.assert_allclose(op.oracle(x, eps=1e-6), want.numpy(), rtol=1e-13, atol=0)


def test_silu_mul_oracle_matches_torch_float64():
    op = get_op("silu_mul")
    x = _inputs(op, {"R": 5, "N": 33})
    want = torch.nn.functional.silu(_t(x["gate"])) * _t(x["up"])
    np.testing.assert_allclose(op.oracle(x), want.numpy(), rtol=1e-14, atol=0)


def test_silu_mul_oracle_is_ieee_at_infinities():
    op = get_op("silu_mul")
    got = op.oracle({"gate": np.array([[np.inf, -np.inf, np.nan, 0.0]]),
                     "up": np.array([[2.0, 2.0, 2.0, 2.0]])})
    assert got[0, 0] == np.inf and np.isnan(got[0, 1]) and np.isnan(got[0, 2]) and got[0, 3] == 0


def test_cumsum_oracle_and_its_prefix_lengths():
    op = get_op("cumsum")
    x = _inputs(op, {"R": 3, "N": 50})
    ref = op.oracle(x)
    want = torch.cumsum(_t(x["x"]), dim=-1).numpy()
    loops = np.array([[sum(row[: i + 1]) for i in range(len(row))] for row in x["x"]])
    np.testing.assert_allclose(ref, want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(ref, loops, rtol=1e-12, atol=1e-12)
    q = op.quantities(x, ref)
    assert list(q["prefix"][:3]) == [1.0, 2.0, 3.0] and q["prefix"][-1] == 50
    np.testing.assert_allclose(q["mag"][:, -1], np.abs(x["x"]).sum(axis=-1))


def test_rope_oracle_is_the_half_split_rotation():
    op = get_op("rope")
    x = _inputs(op, {"B": 2, "S": 9, "P": 4})
    # the rotate_half formulation (GPT-NeoX, Hugging Face), in torch float64
    t = _t(x["x"])
    c = torch.cat([_t(x["cos"])] * 2, dim=-1)
    s = torch.cat([_t(x["sin"])] * 2, dim=-1)
    x1, x2 = t.chunk(2, dim=-1)
    want = t * c + torch.cat([-x2, x1], dim=-1) * s
    np.testing.assert_allclose(op.oracle(x), want.numpy(), rtol=1e-14, atol=1e-15)
    # and element-wise: element i is rotated with element i + P by angle theta[s, i]
    th = np.arctan2(x["sin"], x["cos"])
    b, p, i = 1, 5, 3
    a, bb = x["x"][b, p, i], x["x"][b, p, i + 4]
    got = op.oracle(x)
    assert got[b, p, i] == pytest.approx(a * np.cos(th[p, i]) - bb * np.sin(th[p, i]), abs=1e-6)
    # the interleaved (GPT-J) convention is a different function
    inter = np.empty_like(x["x"])
    xe, xo = x["x"][..., 0::2], x["x"][..., 1::2]
    inter[..., 0::2] = xe * x["cos"] - xo * x["sin"]
    inter[..., 1::2] = xo * x["cos"] + xe * x["sin"]
    assert not np.allclose(inter, got)


def test_rope_angles_follow_the_usual_frequencies():
    from kcontract.ops.rope import angles
    th = angles(4, 8)
    assert th[0].tolist() == [0.0] * 8 and th[1, 0] == 1.0
    assert th[3, 1] == pytest.approx(3 * 10000 ** (-1 / 8))


def test_topk_oracle_matches_a_stable_torch_sort_with_ties_and_nan():
    op = get_op("topk")
    x = _inputs(op, {"R": 6, "N": 40, "K": 12}, family="integer")
    x["x"][1, 7] = np.nan
    x["x"][2, [3, 9]] = [np.inf, -np.inf]
    want = torch.sort(_t(x["x"]), dim=-1, descending=True, stable=True).indices[:, :12]
    got = op.oracle(x)
    assert got.dtype == np.float64 and np.array_equal(got, want.numpy().astype(np.float64))
    assert got[1, 0] == 7 and got[2, 0] == 3  # NaN ranks first, then +Inf
    # ties to the lower index: within equal values, indices ascend
    vals = np.take_along_axis(x["x"], got.astype(np.int64), axis=-1)
    for r in range(6):
        for j in range(11):
            if vals[r, j] == vals[r, j + 1]:
                assert got[r, j] < got[r, j + 1]


def test_topk_output_is_exact_int64_with_unit_ulp():
    from kcontract.formats import ulp
    op = get_op("topk")
    fmt = op.output_format(F32)
    assert fmt.name == "int64" and np.all(ulp(np.array([1.0, 7.0, 4097.0]), fmt) == 1.0)
    x = op.generate(op.full_shape({"R": 2, "N": 9, "K": 4}), F32, "normal", np.random.default_rng(1))
    assert x["k"].dtype == np.int64 and x["k"].shape == () and op.solve_shape(x)["K"] == 4
    assert op.output_shape(op.solve_shape(x)) == (2, 4)


def test_torch_adapter_keeps_a_0d_argument_0d():
    from kcontract.adapters import get_adapter
    ad = get_adapter("torch")
    t = ad.to_native(np.array(8, dtype=np.int64), "cpu")
    assert tuple(t.shape) == () and int(t) == 8
    back, meta = ad.to_numpy(t)
    assert back.shape == () and meta["shape"] == ()


@pytest.mark.parametrize("family", ["normal", "logits", "offset"])
def test_cross_entropy_oracle_matches_torch_float64_with_ignored_rows(family):
    op = get_op("cross_entropy")
    x = _inputs(op, {"R": 16, "C": 37}, family=family)
    assert np.count_nonzero(x["target"] == -100) == 2  # one row in eight is ignored
    want = torch.nn.functional.cross_entropy(_t(x["logits"]), torch.from_numpy(x["target"]),
                                             ignore_index=-100)
    got = op.oracle(x, ignore_index=-100)
    assert got.shape == () and got == pytest.approx(float(want), rel=1e-12)


def test_cross_entropy_rand_inputs_are_the_naive_benchmark_and_every_row_ignored_is_nan():
    op = get_op("cross_entropy")
    x = _inputs(op, {"R": 16, "C": 37}, family="rand")
    assert np.all((x["target"] >= 0) & (x["target"] < 37))
    x["target"][:] = -100
    assert np.isnan(op.oracle(x, ignore_index=-100))


def test_cross_entropy_policies_for_out_of_range_targets():
    from kcontract.ops.cross_entropy import logsumexp, policy_losses
    logits = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    lse = logsumexp(logits)
    target = np.array([5, -1])
    clamp, _ = policy_losses(logits, target, "clamp")
    wrap, _ = policy_losses(logits, target, "wrap")
    zero, _ = policy_losses(logits, target, "zero")
    raised, _ = policy_losses(logits, target, "raise")
    np.testing.assert_allclose(clamp, lse - [3.0, 0.5])
    np.testing.assert_allclose(wrap, lse - [3.0, 2.0])
    np.testing.assert_allclose(zero, lse)
    assert np.all(np.isnan(raised))


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("Q", [0, 128])
def test_scaled_matmul_oracle_against_loops_over_the_stored_fp8_values(fmt, Q):
    op = get_op("scaled_matmul")
    f = get_format(fmt)
    raw = op.generate(op.full_shape({"M": 3, "K": 260, "N": 130, "Q": Q}), f, "normal",
                      np.random.default_rng(4))
    assert raw["a"].dtype == f.dtype and raw["scale_a"].dtype == np.float32
    if Q:
        assert raw["scale_a"].shape == (3, 3) and raw["scale_b"].shape == (3, 2)
    else:
        assert raw["scale_a"].shape == raw["scale_b"].shape == (1, 1)
    x = upcast(raw)
    ref = op.oracle(x)
    sa, sb = x["scale_a"], x["scale_b"]
    for m, n in [(0, 0), (2, 129), (1, 64)]:
        want = 0.0
        for k in range(260):
            ia = (m, k // 128) if Q else (0, 0)
            ib = (k // 128, n // 128) if Q else (0, 0)
            want += x["a"][m, k] * sa[ia] * x["b"][k, n] * sb[ib]
        assert ref[m, n] == pytest.approx(want, rel=1e-12, abs=1e-12)
    # the quantiser fills the fp8 range: every tile's largest element is max(fp8)
    assert np.max(np.abs(x["a"][0, :128])) == pytest.approx(f.max, rel=0.07)
    assert op.output_format(f).name == "bfloat16"
    assert get_op("scaled_matmul_f32").output_format(f).name == "float32"


@pytest.mark.parametrize("shape", list(get_op("conv2d").shape_class) + [{}])
def test_conv2d_oracle_matches_torch_float64(shape):
    op = get_op("conv2d")
    x = _inputs(op, shape)
    s, p = int(x["stride"]), int(x["padding"])
    want = torch.nn.functional.conv2d(_t(x["x"]), _t(x["w"]), stride=s, padding=p).numpy()
    got = op.oracle(x)
    assert got.shape == want.shape == op.output_shape(op.solve_shape(x))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    g = op.solve_shape(x)
    assert op.reduction_length(g) == g["C"] * g["KH"] * g["KW"]


def test_conv2d_clips_a_kernel_larger_than_the_padded_input():
    op = get_op("conv2d")
    x = _inputs(op, {"N": 1, "C": 2, "H": 2, "W": 3, "O": 1, "KH": 7, "KW": 7, "S": 0, "P": 1})
    assert x["w"].shape == (1, 2, 4, 5) and int(x["stride"]) == 1
    assert op.oracle(x).shape == (1, 1, 1, 1)


def test_cross_entropy_out_of_range_targets_are_classified_by_policy():
    from conftest import kernel
    from suite_helpers import run_one
    spec = kernel("correct_numpy.py", "cross_entropy_clamp")
    declared_raise = run_one("exc02-cross_entropy", spec)
    assert declared_raise.verdict.value == "violation"
    assert "observed clamp on negative indices; clamp on indices >= V" in declared_raise.message
    assert run_one("exc02-cross_entropy", spec, declare={"oob": "clamp"}).verdict.value == "pass"
    assert run_one("exc02-cross_entropy", kernel("correct_numpy.py", "cross_entropy"),
                   declare={"oob": "raise"}).verdict.value == "pass"


def test_kcontract_calibrate_for_a_new_op_is_sound(run_cli, tmp_path):
    import json
    out = tmp_path / "cal.json"
    code, stdout, _ = run_cli("calibrate", "--op", "cumsum", "--class", "C-ORD-01",
                              "--class", "C-PRC-01", "--json", str(out))
    assert code == 0, stdout
    data = json.loads(out.read_text())
    rows = data
    assert {r["id"] for r in rows} == {"ord01-cumsum", "prc01-cumsum"}
    assert all(r["sound"] for r in rows)
