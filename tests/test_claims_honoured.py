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


@pytest.mark.parametrize("op,kernel", [("softmax", "softmax_ftz"), ("gelu", "gelu_ftz")])
def test_subnormals_flush_is_read_by_every_contract_of_the_op(op, kernel):
    spec = f"{KERNELS}:{kernel}"
    declared = check(spec, op=op, dtype="float32", declare={"subnormals": "flush"},
                     in_process=True)
    assert declared.verdict == "conformant", _bad(declared)
    undeclared = check(spec, op=op, dtype="float32", in_process=True)
    assert undeclared.verdict == "violation"
