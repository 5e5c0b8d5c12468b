"""One registry direction: the runner resolves a contract's protocol, detector and oracle
and hands them to the engine; detectors return a Diagnosis; the oracle part is computed
and checked against the protocol; Contract.out_of_scope is the one scope check."""
import textwrap

import numpy as np
import pytest

from kcontract.check.runner import check, resolve
from kcontract.check.verdict import Diagnosis
from kcontract.classes.oracles import ORACLE_REFERENCES
from kcontract.language.claims import make_claims
from kcontract.errors import ContractError
from kcontract.formats import get_format
from kcontract.language import load_contract_text, registry
from kcontract.language.vocabulary import registered_protocols
from kcontract.suite import get_contract

SUITE = "kcontract.suite.kernels"

registered_protocols()
_SEEN = {}


@registry.protocol("kctest_wiring", oracles=("fp64",))
def _wiring(ctx):
    _SEEN.update(spec=ctx.protocol_spec, detector=ctx.detector, oracle=ctx.oracle)
    inputs = ctx.inputs(ctx.shapes()[0], "normal")
    ref, _ = ctx.reference(inputs)
    _SEEN["ref"] = ref
    diag = ctx.run_detector({})
    return ctx.passed(diag.summary)


@registry.detector("kctest_diagnosis")
def _diag(ctx, evidence):
    return Diagnosis(summary="diagnosed", quantities={"k": 1}, code="refined")


def _contract(extra="", oracle="fp64", kind="kctest_wiring", op="gelu"):
    return load_contract_text(textwrap.dedent(f"""\
        id: my/wiring
        class: C-PRC-01
        scope: {{op: {op}, dtypes: [float32], requires: {{accumulate: float32}}}}
        tolerance: {{tol: ulp(ref)}}
        postcondition: abs(out - ref) <= tol
        oracle: {oracle}
        protocol: {{kind: {kind}}}
        signature: {{code: x, summary: x, detector: kctest_diagnosis}}
        """) + extra)[0]


def test_the_runner_hands_the_engine_what_the_contract_names():
    c = _contract()
    spec, det, oracle = resolve(c)
    assert (spec.name, det.name, oracle) == ("kctest_wiring", "kctest_diagnosis",
                                             ORACLE_REFERENCES["fp64"])
    run = check(f"{SUITE}.cmp03_gelu:good", op="gelu", dtype="float32", contracts=[c],
                in_process=True)
    (res,) = run.results
    assert res.verdict.value == "pass" and res.message == "diagnosed"
    assert _SEEN["spec"] is spec and _SEEN["detector"] is det and _SEEN["oracle"] is oracle


def test_every_oracle_name_is_computed():
    assert set(ORACLE_REFERENCES) == set(registry.ORACLES)


def test_the_unfused_oracle_is_the_declared_approximation():
    """oracle: unfused computes the op's reference under approximation=tanh (gelu's tanh form)."""
    from kcontract.ops import get_op
    from kcontract.ops._math import gelu, gelu_tanh

    class Ctx:
        op = get_op("gelu")
        claims = make_claims(get_format("float32"), {"approximation": "tanh"})
    x = {"x": np.linspace(-3, 3, 7)}
    np.testing.assert_array_equal(ORACLE_REFERENCES["unfused"](Ctx, x, {}), gelu_tanh(x["x"]))
    Ctx.claims = make_claims(get_format("float32"), {})
    np.testing.assert_array_equal(ORACLE_REFERENCES["unfused"](Ctx, x, {}), gelu(x["x"]))


def test_an_oracle_the_protocol_does_not_measure_against_is_malformed():
    with pytest.raises(ContractError, match="protocol repeat measures against the oracle self, "
                                            "not 'fp64'") as err:
        _contract(kind="repeat")
    assert err.value.location.line == 6


def test_a_detector_returns_a_diagnosis():
    with pytest.raises(TypeError, match="must return a Diagnosis, not dict"):
        Diagnosis.of({"summary": "x"})
    assert not Diagnosis() and Diagnosis.of(None) == Diagnosis()
    c = get_contract("prc01-sum")
    run = check(f"{SUITE}.prc01_sum:bad", op="sum", dtype="float32", contracts=[c],
                in_process=True)
    (res,) = run.results
    assert res.verdict.value == "violation" and "summary" not in res.signature


def test_out_of_scope_is_the_one_scope_check():
    c = _contract()
    claims = make_claims(get_format("float32"), {})
    assert c.out_of_scope("gelu", "float32", "numpy", claims) is None
    assert c.out_of_scope("sum", "float32", "numpy") == "not in scope for op sum (scope: gelu)"
    assert c.out_of_scope("gelu", "float16", "numpy").startswith("not in scope for dtype float16")
    assert c.out_of_scope("gelu", "float32", "mxnet") == "not in scope for framework mxnet"
    other = make_claims(get_format("float32"), {"accumulate": "float16"})
    assert c.out_of_scope("gelu", "float32", "numpy", other) == (
        "applies only when accumulate=float32 is declared (declared: float16)")
    assert c.applies_to("gelu", "float32", "numpy") and not c.applies_to("gelu", "float16", "numpy")
    generic = get_contract("prc01-any")
    assert generic.generic and generic.applies_to("anything", "float32", "numpy")
