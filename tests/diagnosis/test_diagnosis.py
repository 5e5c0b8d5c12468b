"""The run-level diagnosis: one primary cause per finding on the corpus (a fast subset; the
whole corpus is benchmarks/bench_diagnosis.py), identical kernel errors grouped, consequences
folded under their cause, an 80-column verdict table."""
import io
import os
import sys

import pytest
from rich.console import Console

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from corpus import CASES, available, score  # noqa: E402

from kcontract.check.runner import check  # noqa: E402
from kcontract.cli.render import print_run  # noqa: E402
from kcontract.diagnosis import diagnose  # noqa: E402

FAST = ("np-matmul-fp16-operands", "np-softmax-naive", "np-gelu-tanh", "np-gelu-vectorized",
        "np-embedding-take-clip", "hacked-reuses-result", "np-layernorm", "np-attention",
        "np-layernorm-bf16-via-fp32",
        # real libraries: a cause established by an experiment on this machine (SDPA's
        # exponential), and jax.nn.standardize's one-pass variance named from the fitted growth
        "torch-attention-fp32", "torch-layernorm-ftz", "jax-layernorm-fast-flush-declared",
        # JAX at 16 bits: per-op rounding named as the working precision, beside a real flush
        # and a real one-pass variance
        "jax-softmax-fp16", "jax-layernorm-fast-bf16",
        # bfloat16 operands: the subnormal contract follows from them though it still fails
        # with bfloat16 intermediates granted (the output rounding is beyond that claim)
        "torch-matmul-autocast-bf16")
BY_NAME = {c.name: c for c in CASES}
_RUNS = {}


def run_of(name):
    if name not in _RUNS:
        c = BY_NAME[name]
        # torch and JAX in a worker: a flush mode sticks to the thread pool it was set on,
        # and JAX's threads must not be in a process that forks
        _RUNS[name] = check(c.spec, op=c.op, dtype=c.dtype, framework=c.framework,
                            declare=c.declare, in_process=not c.needs, hints=True)
    return _RUNS[name]


@pytest.mark.parametrize("name", FAST)
def test_primary_cause_is_the_established_one(name):
    if not available(BY_NAME[name]):
        pytest.skip(f"{BY_NAME[name].needs} not installed")
    s = score(BY_NAME[name], run_of(name))
    if s.finding:
        assert s.right, (s.primary, BY_NAME[name].causes)
        assert not s.unrelated, s.unrelated
    else:
        assert not s.false_alarm, s.violated


def test_operand_substitution_explains_the_other_five_classes():
    d = run_of("np-matmul-fp16-operands").to_json()["diagnosis"]
    assert [c["class"] for c in d["primary"]] == ["C-PRC-04"]
    explained = d["explained"]
    assert set(explained) >= {"prc01-matmul", "prc03-matmul", "exc01-matmul", "ord01-matmul"}
    assert "65504" in explained["exc01-matmul"]["reason"]
    assert all(e["by"] == "prc04-matmul" for e in explained.values())


def test_identical_kernel_errors_are_one_cause_listing_the_contracts():
    run = run_of("np-gelu-vectorized")
    d = diagnose(run)
    assert len(d.primary) == 1 and d.primary[0].kind == "error"
    assert len(d.primary[0].contracts) == sum(r.verdict.value == "error" for r in run.results) > 1
    assert run.exit_code == 4  # a kernel error, told apart from a violation (1)
    buf = io.StringIO()
    print_run(run.to_json(), Console(file=buf, width=80))
    assert buf.getvalue().count("the kernel returned dtype") == 1


def test_verdict_table_is_one_line_per_contract_in_80_columns():
    run = run_of("np-matmul-fp16-operands").to_json()
    buf = io.StringIO()
    print_run(run, Console(file=buf, width=80))
    lines = buf.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines)
    for r in run["results"]:
        assert sum(1 for line in lines if f" {r['id']} " in line and r["contract"] in line) >= 1
    cause = next(i for i, line in enumerate(lines) if line.startswith("✗ cause"))
    follows = [i for i, line in enumerate(lines) if "follows from it" in line]
    assert follows and min(follows) > cause  # consequences folded under their cause


def test_diagnosis_reads_a_saved_run_without_one():
    data = run_of("np-softmax-naive").to_json()
    data.pop("diagnosis")
    assert [c.cls for c in diagnose(data).primary] == ["C-PRC-02"]


def test_case_studies_show_one_primary_cause_each():
    from kcontract.cli.demo import load_plan, run_case
    plan = load_plan()
    for cs in plan.case_studies:
        if cs.expect != "violation":
            continue
        d = run_case(cs, plan.base).diagnosed()
        assert len(d.primary) == 1, (cs.key, [c.to_json() for c in d.primary])


def test_hint_re_judges_the_recorded_calls_under_the_suggested_claim():
    c = BY_NAME["np-embedding-take-clip"]
    run = check(c.spec, op=c.op, dtype=c.dtype, in_process=True, hints=True)
    hints = run.diagnosed().hints
    assert [h.claim for h in hints] == ["oob=clamp"] and hints[0].conforms
    assert run.to_json()["diagnosis"]["hints"][0]["text"] == "conforms if declared oob=clamp"
    # and the hint is true: declared, the kernel conforms
    assert check(c.spec, op=c.op, dtype=c.dtype, in_process=True,
                 declare={"oob": "clamp"}).verdict == "conformant"


def test_no_hint_where_no_claim_describes_the_kernel():
    c = BY_NAME["np-softmax-naive"]
    run = check(c.spec, op=c.op, dtype=c.dtype, in_process=True, hints=True)
    assert run.verdict == "violation" and not run.diagnosed().hints


def test_a_flushed_softmax_is_one_subnormal_cause():
    from kcontract.check.verdict import Case, ContractResult, RunResult, Status, Violation
    case = Case(shape={"R": 16, "N": 64}, dtype="float32", seed=0, family="logits")

    def result(cls, cid, code, actual, expected):
        v = Violation(cid, cls, case, code, "m", actual=actual, expected=expected)
        return ContractResult(contract=cls, id=cid, verdict=Status.VIOLATION,
                              message=f"{code} (1 of 1 cases fail)", violation=v,
                              signature={"code": code, "flushed": "outputs"})
    run = RunResult(kernel="k", op="softmax", dtype="float32", framework="numpy", device="cpu",
                    claims={}, environment={}, results=[
                        result("C-PRC-02", "prc02-softmax", "C-PRC-02.unstable-formulation",
                               0.0, 2.2e-42),
                        result("C-PRC-03", "prc03-softmax", "C-PRC-03.subnormal-flush",
                               0.0, 1e-40)])
    d = diagnose(run)
    assert [(c.cls, c.contracts) for c in d.primary] == [("C-PRC-03", ("prc03-softmax",))]
    assert d.explained["prc02-softmax"].by == "prc03-softmax"


def _result(cls, cid, code, signature, *, shape=None, actual=1.0, expected=2.0):
    return {"contract": cls, "id": cid, "verdict": "violation",
            "message": f"{code} (1 of 1 cases fail)", "signature": {"code": code, **signature},
            "violation": {"code": code, "actual": actual, "expected": expected,
                          "case": {"shape": shape or {"R": 16, "N": 512}}}}


def test_a_cancellation_finding_whose_error_grows_like_kappa_follows_from_the_precision():
    """C-PRC-02 on a stable formulation computed in a narrow format (the fit: kappa^1) is not
    an unstable formulation: it follows from the C-PRC-01 finding, or states C-PRC-01."""
    prc02 = _result("C-PRC-02", "prc02-layernorm", "C-PRC-02.unstable-formulation",
                    {"growth": "linear", "kappa_exponent": 1.1})
    prc01 = _result("C-PRC-01", "prc01-layernorm", "C-PRC-01.narrow-accumulator",
                    {"accumulator_format": "float16"})
    d = diagnose({"dtype": "float32", "results": [prc02, prc01]})
    assert [c.cls for c in d.primary] == ["C-PRC-01"]
    assert d.explained["prc02-layernorm"].by == "prc01-layernorm"
    assert "grows like the condition number" in d.explained["prc02-layernorm"].reason
    alone = diagnose({"dtype": "float32", "results": [prc02]})
    assert [c.cls for c in alone.primary] == ["C-PRC-01"]
    # a fitted kappa^2 growth is the formulation's own cause
    quad = _result("C-PRC-02", "prc02-layernorm", "C-PRC-02.unstable-formulation",
                   {"growth": "quadratic", "kappa_exponent": 1.9})
    assert [c.cls for c in diagnose({"dtype": "float32", "results": [quad]}).primary] == \
        ["C-PRC-02"]


def test_inf_from_a_narrower_format_on_large_inputs_is_that_format_substitution():
    # float16 arithmetic only for large inputs: the exceptional-values contract sees Inf
    # where the float32 result is finite, exactly where the product with operands rounded
    # to float16 overflows; the cause is the substitution, and the subnormal contract's
    # Inf (its scaled cases) follows from it
    from pathlib import Path
    path = Path(__file__).parents[1] / "adversarial" / "f0_fp16_on_large_inputs.py"
    d = check(f"{path}:kernel", op="matmul", dtype="float32", in_process=True,
              hints=True).to_json()["diagnosis"]
    assert [(c["class"], c["contracts"]) for c in d["primary"]] == [("C-PRC-04", ["exc01-matmul"])]
    assert "operands rounded to fp16 overflows" in d["primary"][0]["cause"]
    assert d["explained"]["prc03-matmul"]["by"] == "exc01-matmul"


def test_a_wrong_element_at_the_end_of_long_rows_is_localized_not_a_narrow_accumulator():
    from pathlib import Path
    path = Path(__file__).parents[1] / "adversarial" / "f0_wrong_last_element_on_long_rows.py"
    run = check(f"{path}:kernel", op="cumsum", dtype="float32", in_process=True, hints=True)
    d = run.to_json()["diagnosis"]
    assert [(c["class"], c["code"]) for c in d["primary"]] == [
        ("C-CMP-03", "C-PRC-01.localized-error")]
    assert "all at the last position of the last axis" in d["primary"][0]["cause"]
    assert d["explained"]["ord01-cumsum"]["reason"] == "the same tail or boundary elements fail"


def test_a_passing_precision_contract_keeps_the_working_precision_out_of_the_diagnosis():
    # the kernel showed the declared precision (C-PRC-01 passes): a narrower working
    # precision that only loosens another contract's tolerance until a real flush passes
    # is no cause; the flush stays the cause
    from kcontract.diagnosis import diagnose
    from kcontract.diagnosis.model import Hint
    run = {"dtype": "bfloat16", "claims": {"accumulate": "float32"}, "results": [
        {"id": "prc01-attention", "contract": "C-PRC-01", "verdict": "pass"},
        {"id": "prc03-attention", "contract": "C-PRC-03", "verdict": "violation",
         "message": "subnormal inputs treated as zero (DAZ) (3 of 3 cases fail)",
         "signature": {"code": "C-PRC-03.subnormal-flush", "flushed": "inputs and outputs"}}]}
    hint = Hint("accumulate=bfloat16", ("prc03-attention",), (), True)
    d = diagnose(run, [hint])
    assert [(c.cls, c.code) for c in d.primary] == [("C-PRC-03", "C-PRC-03.subnormal-flush")]
    # without the passing precision contract, the flush (its evidence is a flush) is still
    # not folded into the precision either
    run["results"] = run["results"][1:]
    assert [c.cls for c in diagnose(run, [hint]).primary] == ["C-PRC-03"]
