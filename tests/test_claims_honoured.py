"""Every declared claim is read by every contract it affects: a kernel that does exactly what
it declares conforms to every contract of its op, and the same kernel without the declaration
does not."""
import numpy as np
import pytest

from kcontract.check.runner import check
from kcontract.language.claims import CLAIMS
from kcontract.diagnosis.claims import CLAIM_READERS
from kcontract.suite import load_suite

KERNELS = __file__.replace("test_claims_honoured.py", "kernels/claims_kernels.py")


def _bad(run):
    return [(r.id, r.verdict.value, r.message[:120]) for r in run.results
            if r.verdict.value in ("violation", "error")]


def test_every_claim_is_read_by_a_contract_or_by_every_contract():
    read = {k for c in load_suite() for k in (c.claims or ())}
    for key in CLAIMS:
        assert key in read or key in CLAIM_READERS, f"no contract reads the claim {key}"


@pytest.mark.parametrize("op,kernel", [("gelu", "gelu_tanh"), ("linear_gelu", "linear_gelu_tanh")])
def test_approximation_tanh_is_read_by_every_contract_of_the_op(op, kernel):
    spec = f"{KERNELS}:{kernel}"
    declared = check(spec, op=op, dtype="float32", declare={"approximation": "tanh"},
                     in_process=True)
    assert declared.verdict == "conformant", _bad(declared)
    undeclared = check(spec, op=op, dtype="float32", in_process=True)
    assert any(r.contract == "C-CMP-01" for r in undeclared.results
               if r.verdict.value == "violation")


@pytest.mark.parametrize("op,kernel", [("softmax", "softmax_ftz"), ("gelu", "gelu_ftz"),
                                       ("layernorm", "layernorm_ftz"),
                                       ("attention", "attention_ftz"),
                                       ("linear_gelu", "linear_gelu_ftz")])
def test_subnormals_flush_is_read_by_every_contract_of_the_op(op, kernel):
    spec = f"{KERNELS}:{kernel}"
    declared = check(spec, op=op, dtype="float32", declare={"subnormals": "flush"},
                     in_process=True)
    assert declared.verdict == "conformant", _bad(declared)
    undeclared = check(spec, op=op, dtype="float32", in_process=True)
    assert undeclared.verdict == "violation"
    # the op's own subnormal contract is what the undeclared flush breaks
    assert any(r.contract == "C-PRC-03" for r in undeclared.results
               if r.verdict.value == "violation"), _bad(undeclared)


def test_every_op_with_subnormal_probes_has_a_subnormal_contract_honouring_flush():
    """An op that declares subnormal probes has a C-PRC-03 contract, and every C-PRC-03
    contract reads the subnormals claim (skipped when flush is declared)."""
    from kcontract.ops import get_op
    prc03 = [c for c in load_suite() if c.cls == "C-PRC-03"]
    covered = {c.op for c in prc03}
    for c in load_suite():
        op = get_op(c.op)
        if op.capabilities()["subnormal_inputs"]:
            assert c.op in covered, f"{c.op} declares subnormal probes but has no C-PRC-03 contract"
    for c in prc03:
        assert "subnormals" in (c.claims or ()), c.id
        assert (c.scope.requires or {}).get("subnormals") == "preserve", c.id
