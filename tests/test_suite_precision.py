"""The precision family (C-PRC-01..04): calibration, fingerprint, signatures, case study."""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from kcontract.check.runner import check
from kcontract.classes.fingerprint import (estimate_bits, fingerprint_attention, fingerprint_matmul,
                                           fingerprint_sum, identify_rounding, predict_single,
                                           recipe_text, round_mode)
from kcontract.formats import round_to
from kcontract.language.loader import load_contracts
from kcontract.suite import CONTRACTS_DIR
from kcontract.suite.kernels import prc_recipes as R

import newops_contracts
from suite_helpers import assert_soundly_calibrated, run_one

ROOT = Path(__file__).resolve().parents[1]
PRC_IDS = sorted(p.stem for p in CONTRACTS_DIR.glob("prc*.yaml"))
RECIPES_MOD = "kcontract.suite.kernels.prc_recipes"


def contract(cid: str):
    return load_contracts(str(CONTRACTS_DIR / f"{cid}.yaml"))[0]


def test_the_family_is_complete():
    expected = {"prc01-matmul", "prc01-sum", "prc01-attention", "prc01-layernorm",
                "prc01-linear_gelu", "prc02-softmax", "prc02-layernorm", "prc02-attention",
                "prc03-matmul", "prc03-sum", "prc03-gelu", "prc03-cast", "prc03-softmax",
                "prc03-layernorm", "prc03-attention", "prc03-linear_gelu",
                "prc04-matmul", "prc04-attention", "prc04-cast"}
    assert set(PRC_IDS) == expected | newops_contracts.PRC
    for cid in PRC_IDS:
        c = contract(cid)
        assert c.id == cid and c.cls == f"C-PRC-0{cid[4]}"
        assert c.signature.detector, f"{cid} names no detector"
        assert "deriv" in c.description.lower() or "tolerance" in c.description.lower()


# -- three-state calibration ---------------------------------------------------------------

@pytest.mark.parametrize("cid", PRC_IDS)
def test_calibration_is_sound(cid):
    assert_soundly_calibrated(cid)


# -- the precision fingerprint ---------------------------------------------------------------

SIX = [
    ("matmul_fp32_fp32", "float32", "float32", "fp32 operands, fp32 accumulation"),
    ("matmul_tf32_fp32", "tfloat32", "float32", "operands rounded to tf32, fp32 accumulation"),
    ("matmul_bf16_fp32", "bfloat16", "float32", "operands rounded to bf16, fp32 accumulation"),
    ("matmul_fp16_fp32", "float16", "float32", "operands rounded to fp16, fp32 accumulation"),
    ("matmul_fp32_fp16acc", "float32", "float16", "fp32 operands, fp16 accumulation"),
    ("matmul_fp32_bf16acc", "float32", "bfloat16", "fp32 operands, bf16 accumulation"),
]


@pytest.mark.parametrize("name,operand,acc,text", SIX, ids=[s[0] for s in SIX])
def test_fingerprint_names_each_recipe_exactly(name, operand, acc, text):
    fp = fingerprint_matmul(getattr(R, name))
    assert (fp.operand_format, fp.accumulator_format) == (operand, acc)
    assert fp.recipe == text == recipe_text(operand, acc)
    assert fp.confidence == 1.0
    # only recipes that are indistinguishable on every probe may tie
    assert fp.equivalent == []
    bits = fp.accumulator_bits
    lo, hi = {"float32": (20, 30), "float16": (9.5, 13), "bfloat16": (6, 10)}[acc]
    assert lo <= bits <= hi, f"{name}: estimated {bits} accumulator bits"
    assert fp.integer_sum_exact is (acc == "float32")


@pytest.mark.parametrize("name,acc", [("matmul_fp32_fp16acc_pairwise", "float16"),
                                      ("matmul_fp32_bf16acc_blocked", "bfloat16"),
                                      ("matmul_fp16_fp32_float64", "float32")])
def test_fingerprint_does_not_depend_on_the_summation_order(name, acc):
    fp = fingerprint_matmul(getattr(R, name))
    assert fp.accumulator_format == acc
    assert fp.confidence == 1.0


def test_recipe_predictions_are_order_free_and_distinct():
    from kcontract.classes.fingerprint import candidate_recipes, single_product_probe
    a, b, names = single_product_probe()
    preds = {r: predict_single(a, b, *r) for r in candidate_recipes("float32")}
    six = [(o, c) for _, o, c, _ in SIX]
    for i, r1 in enumerate(six):
        for r2 in six[i + 1:]:
            differ = ~((preds[r1] == preds[r2]) | (np.isnan(preds[r1]) & np.isnan(preds[r2])))
            assert differ.sum() >= 3, f"{r1} and {r2} differ on only {differ.sum()} probes"


def test_honest_fp32_matmul_is_not_flagged():
    spec = f"{RECIPES_MOD}:matmul_fp32_fp32"
    for cid in ("prc01-matmul", "prc04-matmul", "prc03-matmul"):
        assert run_one(cid, spec).verdict.value == "pass"


@pytest.mark.parametrize("name,operand,acc,text", SIX[1:], ids=[s[0] for s in SIX[1:]])
def test_contracts_report_the_recipe(name, operand, acc, text):
    spec = f"{RECIPES_MOD}:{name}"
    cid = "prc04-matmul" if acc == "float32" else "prc01-matmul"
    res = run_one(cid, spec)
    assert res.verdict.value == "violation"
    sig = res.signature
    assert sig["recipe"] == text
    assert (sig["operand_format"], sig["accumulator_format"]) == (operand, acc)
    want = f"operands rounded to {text.split()[3].rstrip(',')}" if acc == "float32" else \
        f"accumulates like {text.split(', ')[1].split()[0]}"
    assert want in res.message


def test_sum_fingerprint():
    from kcontract.suite.kernels import prc01_sum
    assert fingerprint_sum(prc01_sum.good).accumulator_format == "float32"
    fp = fingerprint_sum(prc01_sum.bad)  # fp32 blocks, fp16 workspace
    assert fp.accumulator_format == "float16" and fp.integer_sum_exact is False

    def seq_bf16(x):
        acc = np.zeros(x.shape[:-1], dtype=ml_dtypes.bfloat16)
        for k in range(x.shape[-1]):
            acc = (acc.astype(np.float32) + x[..., k]).astype(ml_dtypes.bfloat16)
        return acc.astype(np.float32)
    fp = fingerprint_sum(seq_bf16)
    assert fp.accumulator_format == "bfloat16" and 6 <= fp.accumulator_bits <= 10


def test_attention_fingerprint_sees_the_pv_stage():
    from kcontract.suite.kernels import prc01_attention, prc04_attention
    good = fingerprint_attention(prc01_attention.good)
    assert (good.operand_format, good.accumulator_format) == ("float32", "float32")
    bad = fingerprint_attention(prc01_attention.bad)
    assert bad.accumulator_format == "float16"
    sub = fingerprint_attention(prc04_attention.bad)
    assert (sub.operand_format, sub.accumulator_format) == ("bfloat16", "float32")


def test_linear_gelu_fingerprint():
    res = run_one("prc01-linear_gelu", "kcontract.suite.kernels.prc01_linear_gelu:bad")
    assert res.verdict.value == "violation"
    assert res.signature["accumulator_format"] == "float16"


def test_bits_estimate_from_error_growth():
    rng = np.random.default_rng(1)
    samples = []
    for K in (64, 256, 1024):
        x = rng.standard_normal((16, K))
        acc = np.zeros(16)
        for k in range(K):
            acc = round_to(acc + x[:, k], "float16")
        samples.append((K, x, acc, x.sum(axis=1)))
    est = estimate_bits(samples)
    assert est.model == "sequential" and 9.5 <= est.bits <= 13


# -- C-PRC-02 signatures -------------------------------------------------------------------------

def test_prc02_layernorm_names_the_one_pass_variance():
    res = run_one("prc02-layernorm", "kcontract.suite.kernels.prc02_layernorm:bad")
    sig = res.signature
    assert sig["failing_families"] == ["offset"]
    assert set(sig["passing_families"]) == {"normal", "large"}
    assert "E[x²]−E[x]²" in sig["suspected_formulation"]
    assert "fails on family 'offset'" in res.message and "while 'normal'" in res.message
    # the clamped variant stays finite: the kappa^2 growth is what gives it away
    res = run_one("prc02-layernorm", f"{RECIPES_MOD}:layernorm_one_pass_clamped")
    assert res.verdict.value == "violation"
    assert "E[x²]−E[x]²" in res.signature["suspected_formulation"]
    assert res.signature["kappa_exponent"] > 1.5


@pytest.mark.parametrize("kernel", ["kcontract.suite.kernels.prc02_layernorm:bad",
                                    f"{RECIPES_MOD}:layernorm_one_pass_clamped"])
def test_prc02_layernorm_one_pass_growth_is_fitted_quadratic(kernel):
    """The formulation is named from the fit of the error against kappa across offsets."""
    res = run_one("prc02-layernorm", kernel)
    sig = res.signature
    assert sig["growth"] == "quadratic" and 1.6 <= sig["kappa_exponent"] <= 2.6
    g = sig["kappa_growth"]
    assert g["points"] >= 3 and g["kappa_range"][1] / g["kappa_range"][0] >= 8
    assert "fitted over kappa" in sig["suspected_formulation"]


@pytest.mark.parametrize("kernel", ["layernorm_two_pass_fp16", "layernorm_welford_fp16"])
def test_prc02_layernorm_stable_formulation_in_narrow_precision_is_not_called_cancellation(kernel):
    """A two-pass or Welford layernorm computed in float16 fails the fp32 bound everywhere,
    its error growing like kappa: the detector does not name E[x²]−E[x]²."""
    res = run_one("prc02-layernorm", f"{RECIPES_MOD}:{kernel}")
    assert res.verdict.value == "violation"
    sig = res.signature
    assert sig["growth"] == "linear" and 0.6 <= sig["kappa_exponent"] <= 1.4
    assert "E[x²]−E[x]² (one pass)" not in sig["suspected_formulation"]
    assert "variance as" not in sig["suspected_formulation"]
    assert "not a cancellation" in sig["suspected_formulation"]


def test_prc02_layernorm_welford_conforms_and_undecided_growth_is_inconclusive():
    assert run_one("prc02-layernorm", f"{RECIPES_MOD}:layernorm_welford").verdict.value == "pass"
    # bfloat16 statistics: the error reaches the result's size before it can be fitted
    res = run_one("prc02-layernorm", f"{RECIPES_MOD}:layernorm_welford_bf16")
    sig = res.signature
    assert sig["suspected_formulation"].startswith("inconclusive: ")
    assert "E[x²]−E[x]²" not in sig["suspected_formulation"].split("inconclusive: ")[1] \
        or "neither" in sig["suspected_formulation"]
    assert sig.get("kappa_exponent") is None or sig["growth"] == "other"


@pytest.mark.parametrize("cid", ["prc02-softmax", "prc02-attention"])
def test_prc02_exp_without_max_subtraction(cid):
    mod = "kcontract.suite.kernels." + cid.replace("-", "_")
    res = run_one(cid, f"{mod}:bad")
    sig = res.signature
    assert "logits" in sig["failing_families"] and "normal" in sig["passing_families"]
    assert "exp without max subtraction" in sig["suspected_formulation"]
    assert sig["nonfinite_outputs"] > 0


# -- C-PRC-03 signatures -------------------------------------------------------------------------

@pytest.mark.parametrize("cid,kernel,where", [
    ("prc03-matmul", "kcontract.suite.kernels.prc03_matmul:bad", "inputs"),
    ("prc03-matmul", f"{RECIPES_MOD}:matmul_ftz_outputs", "outputs"),
    ("prc03-matmul", f"{RECIPES_MOD}:matmul_daz_ftz", "inputs and outputs"),
    ("prc03-sum", "kcontract.suite.kernels.prc03_sum:bad", "outputs"),
    ("prc03-sum", f"{RECIPES_MOD}:sum_daz", "inputs"),
    ("prc03-gelu", "kcontract.suite.kernels.prc03_gelu:bad", "outputs"),
    ("prc03-softmax", "kcontract.suite.kernels.prc03_softmax:bad", "outputs"),
    ("prc03-layernorm", "kcontract.suite.kernels.prc03_layernorm:bad", "outputs"),
    ("prc03-attention", "kcontract.suite.kernels.prc03_attention:bad", "outputs"),
    ("prc03-linear_gelu", "kcontract.suite.kernels.prc03_linear_gelu:bad", "inputs"),
    ("prc03-layernorm", f"{RECIPES_MOD}:layernorm_daz", "inputs"),
    ("prc03-attention", f"{RECIPES_MOD}:attention_daz", "inputs"),
    ("prc03-linear_gelu", f"{RECIPES_MOD}:linear_gelu_ftz", "outputs"),
])
def test_prc03_says_where_subnormals_were_flushed(cid, kernel, where):
    res = run_one(cid, kernel)
    assert res.verdict.value == "violation"
    assert res.signature["flushed"] == where
    if "outputs" in where:
        assert "subnormal outputs flushed to zero" in res.message
        assert res.signature["flushed_outputs"] > 0
    if "inputs" in where:
        assert "subnormal inputs treated as zero" in res.message
        # zeros where a normal number belongs, or (attention: q read as zero makes the scores
        # 0) normal results equal to the oracle's with the subnormal inputs zeroed
        assert res.signature["normal_results_zeroed"] > 0 or \
            res.signature["normal_results_as_if_zero"] > 0


def test_prc03_attention_names_flushed_probabilities():
    """A kernel that keeps subnormal results but whose exponential flushes probabilities
    below the smallest normal (a vectorised exp) fails on those alone."""
    res = run_one("prc03-attention", f"{RECIPES_MOD}:attention_flush_probabilities")
    assert res.verdict.value == "violation"
    assert res.signature["flushed"] == "outputs"
    assert res.signature["flushed_intermediates"] > 0 and res.signature["flushed_outputs"] == 0
    assert "subnormal probabilities flushed to zero" in res.message
    assert "subnormal inputs are honoured" in res.message


@pytest.mark.parametrize("cid", ["prc03-layernorm", "prc03-attention", "prc03-linear_gelu"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_prc03_new_ops_pass_honest_kernels_at_narrow_formats(cid, dtype):
    mod = "kcontract.suite.kernels." + cid.replace("-", "_")
    assert run_one(cid, f"{mod}:good", dtype=dtype).verdict.value == "pass"
    assert run_one(cid, f"{mod}:bad", dtype=dtype).verdict.value == "violation"


@pytest.mark.parametrize("cid", ["prc03-layernorm", "prc03-attention", "prc03-linear_gelu"])
def test_prc03_new_ops_skipped_when_flush_is_declared(cid):
    mod = "kcontract.suite.kernels." + cid.replace("-", "_")
    res = run_one(cid, f"{mod}:bad", declare={"subnormals": "flush"})
    assert res.verdict.value == "skipped"


def test_prc03_cast_flush_and_declared_flush():
    res = run_one("prc03-cast", "kcontract.suite.kernels.prc03_cast:bad", dtype="float16")
    assert res.signature["flushed"] == "outputs"
    res = run_one("prc03-cast", "kcontract.suite.kernels.prc03_cast:bad", dtype="float16",
                  declare={"subnormals": "flush"})
    assert res.verdict.value == "skipped"


# -- C-PRC-04 cast: rounding mode ------------------------------------------------------------------

def test_round_mode_emulation_matches_native_rne():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(4000) * 1e3, rng.standard_normal(1000) * 1e-6,
                        [65519.0, 65520.0, 1e6, -1e6, 2.0 ** -25, 3 * 2.0 ** -26]])
    x = x.astype(np.float32).astype(np.float64)
    for fmt in ("float16", "bfloat16"):
        np.testing.assert_array_equal(round_mode(x, fmt, "rne"), round_to(x, fmt))
    trunc = (np.ascontiguousarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(round_mode(x, "bfloat16", "rtz"),
                                  trunc.view(ml_dtypes.bfloat16).astype(np.float64))


@pytest.mark.parametrize("kernel,dtype,mode", [
    ("kcontract.suite.kernels.prc04_cast:bad", "bfloat16", "rtz"),
    ("kcontract.suite.kernels.prc04_cast:bad", "float16", "rtz"),
    (f"{RECIPES_MOD}:cast_bf16_round_half_away", "bfloat16", "rna"),
])
def test_prc04_cast_names_the_rounding_mode(kernel, dtype, mode):
    res = run_one("prc04-cast", kernel, dtype=dtype)
    assert res.verdict.value == "violation"
    assert res.signature["rounding_mode"] == mode
    assert res.signature["rounding_matches"][mode] == 1.0


def test_identify_rounding_on_exact_values_is_uninformative_but_safe():
    x = np.array([1.0, 2.0, 0.5])
    info = identify_rounding(x, x, "bfloat16")
    assert info["rounding_mode"] == "rne"


# -- the case study: silent precision coercion --------------------------------------------------

EXAMPLE = ROOT / "examples" / "precision_coercion"


def test_case_study_coerced_matmul_is_diagnosed(run_cli, tmp_path):
    out = tmp_path / "run.json"
    code, stdout, _ = run_cli("check", f"{EXAMPLE / 'kernel.py'}:matmul_coerced_fp16",
                              "--op", "matmul", "--dtype", "float32",
                              "--contract", "C-PRC-01", "--contract", "C-PRC-04",
                              "--json", str(out), "--no-store")
    assert code != 0
    data = json.loads(out.read_text())
    by_class = {r["contract"]: r for r in data["results"]}
    for cls in ("C-PRC-01", "C-PRC-04"):
        r = by_class[cls]
        assert r["verdict"] == "violation"
        assert r["signature"]["operand_format"] == "float16"
        assert r["signature"]["accumulator_format"] == "float32"
        assert r["signature"]["recipe"] == "operands rounded to fp16, fp32 accumulation"
    # the fingerprint tells operand substitution from a narrower accumulator, in the code too
    assert by_class["C-PRC-01"]["signature"]["code"] == "C-PRC-01.operand-substitution"
    assert by_class["C-PRC-04"]["signature"]["code"] == "C-PRC-04.format-substitution"
    assert "fp16" in stdout


@pytest.mark.parametrize("name,code", [("matmul_fp32_fp16acc", "C-PRC-01.narrow-accumulator"),
                                       ("matmul_fp32_bf16acc", "C-PRC-01.narrow-accumulator"),
                                       ("matmul_bf16_fp32", "C-PRC-01.operand-substitution"),
                                       ("matmul_fp16_fp32", "C-PRC-01.operand-substitution")])
def test_prc01_code_names_what_was_narrowed(name, code):
    res = run_one("prc01-matmul", f"{RECIPES_MOD}:{name}")
    assert res.verdict.value == "violation"
    assert res.signature["code"] == code


def test_case_study_honest_matmul_passes(run_cli):
    code, stdout, _ = run_cli("check", f"{EXAMPLE / 'kernel.py'}:matmul_fp32",
                              "--op", "matmul", "--dtype", "float32",
                              "--contract", "C-PRC-01", "--contract", "C-PRC-03",
                              "--contract", "C-PRC-04", "--no-store")
    assert code == 0, stdout


def test_derived_tolerances_hold_for_honest_16bit_kernels():
    """fp16/bf16 kernels with fp32 accumulation (the declared default) conform."""
    def mm(a, b):
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    mod = types.ModuleType("kc_prc_honest16")
    mod.mm = mm
    sys.modules["kc_prc_honest16"] = mod
    for dt in ("float16", "bfloat16"):
        for cid in ("prc01-matmul", "prc04-matmul", "prc03-matmul"):
            res = run_one(cid, "kc_prc_honest16:mm", dtype=dt)
            assert res.verdict.value == "pass", (cid, dt, res.message)


# -- the recovered recipe in C-PRC-01/04 violations ---------------------------------------------

@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "worker"])
def test_violation_carries_the_recovered_recipe(in_process):
    """A failing C-PRC-01 runs the staged recovery on the kernel, through the check's own
    calls (in the kernel's worker): the recipe's fields with confidence in the signature
    and the JSON, its summary in the message; the signature code stays."""
    res = run_one("prc01-matmul", f"{RECIPES_MOD}:matmul_fp32_fp16acc", in_process=in_process)
    assert res.verdict.value == "violation"
    sig = json.loads(json.dumps(res.signature))  # what the JSON holds
    assert sig["code"] == "C-PRC-01.narrow-accumulator"
    assert sig["recipe"] == "fp32 operands, fp16 accumulation"  # the fixed-list name stays
    rec = sig["recovered_recipe"]
    assert rec["operand_format"] == "float32" and rec["accumulator_bits"] == 11
    assert rec["accumulator_rounding"] == "nearest"
    assert rec["accumulator_bits_confidence"] == 1.0
    for name in ("fused_group", "promotion_interval", "subnormal_inputs", "subnormal_outputs"):
        assert name in rec and f"{name}_confidence" in rec
    assert rec["evidence"]["accumulator_bits"] and rec["sweep"]
    assert "recovered recipe: fp32 operands, 11-bit accumulator (nearest)" in res.message


def test_prc04_violation_carries_the_recovered_operands():
    res = run_one("prc04-matmul", f"{RECIPES_MOD}:matmul_bf16_fp32")
    assert res.signature["code"] == "C-PRC-04.format-substitution"
    rec = res.signature["recovered_recipe"]
    assert rec["operand_format"] == "bfloat16" and rec["accumulator_bits"] == 24
    assert "recovered recipe: bf16 operands" in res.message


@pytest.mark.parametrize("cid, kernel, want", [
    ("prc01-linear_gelu", "prc01_linear_gelu:bad",
     {"operand_format": "float32", "workspace_interval": 64, "workspace_bits": 11}),
    ("prc01-sum", "prc01_sum:bad", {"workspace_interval": 256, "workspace_bits": 11}),
    ("prc01-attention", "prc01_attention:bad", {"operand_format": "float32",
                                                "accumulator_bits": 11}),
])
def test_the_other_ops_violations_carry_the_recovered_recipe(cid, kernel, want):
    res = run_one(cid, f"kcontract.suite.kernels.{kernel}")
    assert res.verdict.value == "violation"
    rec = res.signature["recovered_recipe"]
    assert {k: rec.get(k) for k in want} == want
    if cid == "prc01-attention":
        assert "score_bits" in rec and "scores from fp32 q, k" in rec["summary"]


def test_scaled_matmul_violation_recovers_with_unit_scales():
    """scaled_matmul has no fixed-list probe: the recovery calls it with unit per-tensor
    scales (its fingerprint.recipe_adapt) and finds the 14-bit fp8 accumulator."""
    res = run_one("prc01-scaled_matmul_f32", "kcontract.suite.kernels.prc01_scaled_matmul_f32:bad",
                  dtype="float8_e4m3fn")
    assert res.verdict.value == "violation"
    rec = res.signature["recovered_recipe"]
    assert rec["operand_format"] == "float8_e4m3fn" and rec["accumulator_bits"] == 14
    assert rec["accumulator_bits_confidence"] == 1.0


def test_a_kernel_failing_a_recovery_probe_keeps_its_verdict():
    """The recovery's first probe (a 32 x 4 product) raises: the violation stands, the
    signature says why no recipe was recovered."""
    mod = types.ModuleType("prc_recovery_fails")

    def matmul(a, b):
        if a.shape[1] == 4:
            raise RuntimeError("no such tile")
        return R.matmul_fp32_fp16acc(a, b)
    mod.matmul = matmul
    sys.modules[mod.__name__] = mod
    try:
        res = run_one("prc01-matmul", f"{mod.__name__}:matmul")
    finally:
        del sys.modules[mod.__name__]
    assert res.verdict.value == "violation"
    assert res.signature["code"] == "C-PRC-01.narrow-accumulator"
    rec = res.signature["recovered_recipe"]
    assert rec["summary"] is None and "no such tile" in rec["error"]


def test_a_passing_contract_recovers_nothing():
    res = run_one("prc01-matmul", f"{RECIPES_MOD}:matmul_fp32_fp32")
    assert res.verdict.value == "pass" and "recovered_recipe" not in (res.signature or {})


def test_two_failing_contracts_of_one_check_recover_once(monkeypatch):
    """C-PRC-01 and C-PRC-04 both fail on fp16-coerced operands: the deterministic
    recovery runs once for the check, and both violations carry its recipe."""
    import kcontract.fingerprint as fp
    runs = []
    real = fp.recover

    def counting(target, op):
        runs.append(op)
        return real(target, op)
    monkeypatch.setattr(fp, "recover", counting)
    cs = [contract("prc01-matmul"), contract("prc04-matmul")]
    run = check(f"{RECIPES_MOD}:matmul_fp16_fp32", op="matmul", dtype="float32", contracts=cs,
                in_process=True)
    assert [r.verdict.value for r in run.results] == ["violation", "violation"]
    assert runs == ["matmul"]
    recs = [r.signature["recovered_recipe"] for r in run.results]
    assert recs[0]["summary"] and recs[0]["summary"] == recs[1]["summary"]
    assert recs[0]["operand_format"] == "float16"
    # the recovery's kernel calls are counted where they were made: the first contract
    assert run.results[0].cases > recs[0]["calls"] > run.results[1].cases


def test_a_grossly_wrong_kernel_gets_no_recovered_recipe(monkeypatch):
    """Results wrong rather than rounded (the negated product: every error twice the
    result) violate C-PRC-01, but no rounding recipe is recovered for them."""
    import kcontract.fingerprint as fp
    runs = []
    real = fp.recover

    def counting(target, op):
        runs.append(op)
        return real(target, op)
    monkeypatch.setattr(fp, "recover", counting)
    mod = types.ModuleType("prc_gross")
    mod.matmul = lambda a, b: -np.matmul(a, b)
    sys.modules[mod.__name__] = mod
    try:
        res = run_one("prc01-matmul", f"{mod.__name__}:matmul")
    finally:
        del sys.modules[mod.__name__]
    assert res.verdict.value == "violation"
    assert "recovered_recipe" not in res.signature and runs == []
    assert "no rounding recipe explains it" in res.message
