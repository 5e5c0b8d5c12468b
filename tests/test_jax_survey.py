"""The survey on JAX's CPU backend finds its real behaviours under the right classes:
subnormals flushed inside XLA computations (C-PRC-03, inputs and outputs), the one-pass
variance of jax.nn.standardize (C-PRC-02), jnp.take's NaN fill (C-EXC-02); float16
keeps its subnormals (its arithmetic runs in float32)."""
from __future__ import annotations

import pytest

pytest.importorskip("jax")

from kcontract.survey import survey  # noqa: E402


@pytest.fixture(scope="module")
def jax_cpu():
    return survey("jax", "cpu", ops=["sum", "layernorm", "embedding"],
                  dtypes=["float32", "float16"],
                  classes=("C-PRC-02", "C-PRC-03", "C-EXC-02"), record_runs=False)


def test_subnormals_are_flushed_at_float32_not_at_float16(jax_cpu):
    v = jax_cpu.cell("sum", "float32").classes["C-PRC-03"]
    assert v.verdict == "violation" and v.code == "C-PRC-03.subnormal-flush"
    assert "DAZ" in v.message and "FTZ" in v.message
    assert jax_cpu.cell("sum", "float16").classes["C-PRC-03"].verdict == "pass"


def test_standardize_is_the_one_pass_variance(jax_cpu):
    v = jax_cpu.cell("layernorm", "float32").classes["C-PRC-02"]
    assert v.verdict == "violation" and v.code == "C-PRC-02.unstable-formulation"
    assert "offset" in v.message and "E[x²]−E[x]² (one pass" in v.message


def test_take_does_not_raise_out_of_range(jax_cpu):
    v = jax_cpu.cell("embedding", "float32").classes["C-EXC-02"]
    assert v.verdict == "violation" and v.code == "C-EXC-02.oob-policy"
    assert "declared raise" in v.message and "wrap for -V <= i < 0" in v.message
    assert jax_cpu.environment["framework"] == "jax" and jax_cpu.environment["jax"]
