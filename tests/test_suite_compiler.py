"""The compiler-induced family (C-CMP-01..03): calibration of every contract, and the
signatures (the approximation named, the breaking configuration named, the separating
shape predicate found, stale outputs caught), plus the reward-hacked case study."""
from pathlib import Path

import pytest

from kcontract.check.runner import check
from kcontract.classes.compiler import build_atoms, closest_predicate, hypotheses, separating
from kcontract.ops import get_op
from kcontract.suite import get_contract, load_suite

import newops_contracts
from suite_helpers import assert_soundly_calibrated

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "reward_hacked" / "kernel.py"
CMP_IDS = sorted(c.id for c in load_suite() if c.cls.startswith("C-CMP-"))
CAL = "kcontract.suite.kernels."


def _one(spec, contract_id, *, dtype="float32", declare=None, in_process=True):
    c = get_contract(contract_id)
    run = check(spec, op=c.op, dtype=dtype, contracts=[c], declare=declare or {},
                in_process=in_process)
    return run.results[0]


def test_the_family_has_its_fifteen_contracts():
    assert len(CMP_IDS) == 15 + len(newops_contracts.CMP)
    ops = {"matmul", "sum", "softmax", "layernorm", "attention", "embedding", "gelu",
           "linear_gelu", "cast"}
    assert {i for i in CMP_IDS if i.startswith("cmp03-")} == ({f"cmp03-{o}" for o in ops}
                                                               | newops_contracts.CMP)
    assert {i for i in CMP_IDS if i.startswith("cmp02-")} == {"cmp02-matmul", "cmp02-sum"}
    assert {i for i in CMP_IDS if i.startswith("cmp01-")} == {
        "cmp01-linear_gelu", "cmp01-gelu", "cmp01-attention", "cmp01-attention-causal"}


@pytest.mark.parametrize("contract_id", CMP_IDS)
def test_calibration_is_sound(contract_id):
    # C-CMP-03 tells a stale output from a shape-specialised one: either code is its own
    assert_soundly_calibrated(contract_id, any_code_of_the_class=True)


# -- C-CMP-01 --------------------------------------------------------------------------------

def test_tanh_gelu_is_named():
    res = _one(CAL + "cmp01_gelu:bad", "cmp01-gelu")
    assert res.verdict.value == "violation"
    assert res.signature["approximation"] == "tanh"
    assert "tanh approximation" in res.message and "approximation=tanh" in res.message


def test_declared_tanh_makes_the_tanh_form_the_reference():
    ok = _one(CAL + "cmp01_gelu:bad", "cmp01-gelu", declare={"approximation": "tanh"})
    assert ok.verdict.value == "pass", ok.message
    erf = _one(CAL + "cmp01_gelu:good", "cmp01-gelu", declare={"approximation": "tanh"})
    assert erf.verdict.value == "violation"
    assert erf.signature["approximation"] == "erf"


def test_bf16_product_inside_the_fusion_is_named():
    res = _one(CAL + "cmp01_linear_gelu:bad", "cmp01-linear_gelu")
    assert res.verdict.value == "violation"
    assert "bfloat16" in res.signature["closest_substitution"]


def test_fusion_creating_nan_is_reported(tmp_path):
    src = tmp_path / "nan_gelu.py"
    src.write_text(
        "import math\nimport numpy as np\n"
        "def gelu(x):\n"
        "    x = x.astype(np.float32)\n"
        "    y = np.float32(math.sqrt(2 / math.pi)) * (x + np.float32(0.044715) * x ** 3)\n"
        "    with np.errstate(all='ignore'):\n"
        "        e = np.exp(2 * y)\n"
        "        t = (e - 1) / (e + 1)  # tanh through exp: inf/inf for large x\n"
        "    return (np.float32(0.5) * x * (1 + t)).astype(np.float32)\n")
    res = _one(f"{src}:gelu", "cmp01-gelu", declare={"approximation": "tanh"})
    assert res.verdict.value == "violation"
    assert res.signature["new_nonfinite"] > 0
    assert "NaN/Inf" in res.message


# -- C-CMP-02 --------------------------------------------------------------------------------

def test_breaking_configuration_is_named():
    res = _one(CAL + "cmp02_matmul:bad", "cmp02-matmul")
    assert res.verdict.value == "violation"
    assert res.signature["breaking_configs"] == ["{split_k=4}"]
    assert "default" in res.signature["conforming_configs"]
    assert "{split_k=4}" in res.message
    res = _one(CAL + "cmp02_sum:bad", "cmp02-sum")
    assert res.signature["breaking_configs"] == ["{split=16}"]


def test_kernel_without_configs_is_skipped():
    res = _one(CAL + "cmp03_matmul:good", "cmp02-matmul")
    assert res.verdict.value == "skipped"
    assert "kernel exposes no CONFIGS" in res.message


def test_configs_without_config_parameter_is_an_error(tmp_path):
    src = tmp_path / "noparam.py"
    src.write_text("import numpy as np\nCONFIGS = [{'block': 8}]\n"
                   "def sum(x):\n    return x.sum(-1)\n")
    res = _one(f"{src}:sum", "cmp02-sum")
    assert res.verdict.value == "error"
    assert res.signature["code"] == "kernel.no-config-param"


def test_a_raising_configuration_breaks_the_contract(tmp_path):
    src = tmp_path / "raises.py"
    src.write_text("import numpy as np\nCONFIGS = [{'block': 8}, {'block': 0}]\n"
                   "def sum(x, config=None):\n"
                   "    if config and config['block'] == 0:\n"
                   "        raise ZeroDivisionError('block of 0')\n"
                   "    return x.astype(np.float32).sum(-1).astype(x.dtype)\n")
    res = _one(f"{src}:sum", "cmp02-sum")
    assert res.verdict.value == "violation"
    assert res.signature["breaking_configs"] == ["{block=0}"]


# -- C-CMP-03 --------------------------------------------------------------------------------

def test_k_remainder_kernel_gets_the_k_mod_32_predicate():
    res = _one(f"{EXAMPLE}:matmul_benchmark_shape_only", "cmp03-matmul", in_process=False)
    assert res.verdict.value == "violation"
    assert res.signature["code"] == "C-CMP-03.shape-specialised"
    assert res.signature["predicate"] == "K % 32 != 0"
    assert res.signature["benchmark_pass_rate"] == "1 of 1"
    assert "fails when K % 32 != 0" in res.message


def test_cached_result_is_not_a_function_of_the_inputs():
    res = _one(f"{EXAMPLE}:matmul_reuses_result", "cmp03-matmul", in_process=False)
    assert res.verdict.value == "violation"
    assert res.signature["code"] == "C-CMP-03.stale-output"
    assert res.signature["not_a_function_of_inputs"] is True
    assert "not a function of the current inputs" in res.message
    assert "identical to an earlier call's output" in res.message
    # its wrong answers on views are the same stale output, not a layout dependence
    assert res.signature["layouts"] == {"transposed": "stale", "strided": "stale"}
    assert "views" not in res.message and "failing_layouts" not in res.signature


def test_honest_kernel_passes():
    res = _one(f"{EXAMPLE}:matmul_honest", "cmp03-matmul", in_process=False)
    assert res.verdict.value == "pass", res.message


@pytest.mark.parametrize("contract_id, predicate", [
    ("cmp03-matmul", "K != 128 or N != 64"),  # strides of the benchmark baked in
    ("cmp03-sum", "N % 4 != 0"),
    ("cmp03-layernorm", "N != 512"),
    ("cmp03-attention", "T % 16 != 0"),
    ("cmp03-embedding", "D % 8 != 0"),
    ("cmp03-gelu", "R*N % 8 != 0"),
    ("cmp03-linear_gelu", "N % 16 != 0"),
])
def test_separating_predicate(contract_id, predicate):
    res = _one(CAL + contract_id.replace("-", "_") + ":bad", contract_id)
    assert res.signature.get("predicate") == predicate, res.message


def test_wrong_shape_on_a_held_out_shape_is_a_violation_not_an_error():
    res = _one(CAL + "cmp03_cast:bad", "cmp03-cast", dtype="float16")
    assert res.verdict.value == "violation"
    assert res.signature["predicate"] == "R == 1"
    assert "wrong shape" in res.message


def test_kernel_failing_everywhere_is_an_error():
    res = _one(CAL + "cmp03_softmax:baseline", "cmp03-softmax")
    assert res.verdict.value == "error"


def test_predicate_search_on_synthetic_observations():
    op = get_op("sum")
    bench = op.full_shape({})
    shapes = [op.full_shape(s) for s in op.shape_class] + [bench]
    for truth, fails in [("N % 4 != 0", lambda s: s["N"] % 4 != 0),
                         ("N == 1", lambda s: s["N"] == 1),
                         ("N > 1000", lambda s: s["N"] > 1000)]:
        obs = [(s, fails(s)) for s in shapes]
        atoms = build_atoms(op, shapes, bench)
        found = sorted(separating(atoms, obs), key=lambda a: (a.rank, a.order))
        assert truth in [a.text for a in found], (truth, [a.text for a in found])
    # two causes: a disjunction, when no single predicate separates (the shape class's
    # most rows, 33, fails besides N == 1)
    obs = [(s, s["N"] == 1 or s["R"] == 33) for s in shapes]
    atoms = build_atoms(op, shapes, bench)
    assert not separating(atoms, obs)
    texts = [h.text for h in hypotheses(atoms, obs)]
    assert any("N == 1" in t and "R" in t for t in texts), texts
    assert closest_predicate(atoms, obs)[1] == 0


# -- C-CMP-03: memory layouts ----------------------------------------------------------------

STRIDES = Path(__file__).parent / "kernels" / "strides.py"


@pytest.mark.parametrize("fn,cid,framework", [
    ("matmul_ignores_strides", "cmp03-matmul", "numpy"),
    ("softmax_ignores_strides", "cmp03-softmax", "numpy"),
    ("torch_matmul_ignores_strides", "cmp03-matmul", "torch"),
])
def test_a_kernel_that_ignores_strides_is_layout_specialised(fn, cid, framework):
    c = get_contract(cid)
    res = check(f"{STRIDES}:{fn}", op=c.op, dtype="float32", contracts=[c],
                framework=framework).results[0]
    assert res.verdict.value == "violation", res.message
    assert res.signature["code"] == "C-CMP-03.layout-specialised"
    # right at every shape with contiguous inputs: only the layout is at fault
    h_pass, _, h_all = res.signature["heldout_pass_rate"].partition(" of ")
    assert h_pass == h_all and res.signature["benchmark_pass_rate"] == "1 of 1"
    assert res.signature["layouts"] == {"transposed": "fail", "strided": "fail"}
    assert "reads memory as if every input were contiguous" in res.message
    assert "layout=" in res.violation.case.describe()


def test_a_kernel_that_raises_on_views_is_layout_specialised():
    res = _one(f"{STRIDES}:matmul_rejects_views", "cmp03-matmul")
    assert res.verdict.value == "violation", res.message
    assert res.signature["code"] == "C-CMP-03.layout-specialised"
    assert res.message.startswith("fails when the inputs are transposed and strided views")
    assert "inputs must be contiguous" in res.message


def test_honest_kernel_conforms_on_views():
    res = _one(f"{STRIDES}:matmul_honest", "cmp03-matmul")
    assert res.verdict.value == "pass", res.message
    assert "inputs as transposed and strided views" in res.message


def test_a_kernel_wrong_at_every_shape_is_not_called_shape_specialised():
    """An fp16 accumulator is wrong at the benchmarked shape too, and the held-out shapes err
    no more than that precision predicts: not a shape fault (C-PRC-01 judges the precision),
    so C-CMP-03 neither claims a shape dependence nor staleness, and says why."""
    res = _one(CAL + "prc01_matmul:bad", "cmp03-matmul")
    assert res.verdict.value == "pass", res.message
    assert "benchmarked shape fails too" in res.message and "C-PRC-01" in res.message
    assert "not a function" not in res.message and "stale_calls" not in res.signature
