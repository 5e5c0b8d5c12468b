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


@pytest.fixture(scope="module")
def jax_softmax():
    return survey("jax", "cpu", ops=["softmax"], dtypes=["float32", "float16", "bfloat16"],
                  record_runs=False)


def test_each_cell_carries_its_diagnosis_not_one_cause_per_failing_class(jax_softmax):
    # float32: the flush is the cause; the failing max-subtraction contract follows from it
    c = jax_softmax.cell("softmax", "float32")
    assert [k["class"] for k in c.causes] == ["C-PRC-03"]
    assert c.classes["C-PRC-02"].verdict == "violation"
    assert c.classes["C-PRC-02"].role == "follows"
    assert c.classes["C-PRC-02"].cause_class == "C-PRC-03"
    assert any("subnormals=flush" in h for h in c.hints)


def test_sixteen_bit_softmax_is_its_working_precision(jax_softmax):
    # every op rounded to float16: the stability contract's failures are float16's precision
    # (re-judged on the recorded calls), and declaring it describes the kernel exactly
    c = jax_softmax.cell("softmax", "float16")
    assert [k["class"] for k in c.causes] == ["C-PRC-01"]
    assert c.classes["C-PRC-02"].role == "cause" and c.classes["C-PRC-02"].cause_class == "C-PRC-01"
    assert "computes in float16" in c.causes[0]["cause"]
    assert "conforms if declared accumulate=float16" in c.hints
    # bfloat16: the same precision, and a real flush beside it (bfloat16 subnormals are
    # float32's, which XLA's CPU backend flushes)
    b = jax_softmax.cell("softmax", "bfloat16")
    assert sorted(k["class"] for k in b.causes) == ["C-PRC-01", "C-PRC-03"]


def test_the_renderings_show_the_cause_and_fold_its_consequences(jax_softmax):
    import io
    from rich.console import Console
    from kcontract.survey.render import FOLLOWS, matrix_html, print_matrix
    page = matrix_html(jax_softmax)
    assert "PRC-01: narrow-accumulator" in page and f"{FOLLOWS} PRC-03" in page
    buf = io.StringIO()
    print_matrix(jax_softmax, Console(file=buf, width=80, color_system=None))
    text = buf.getvalue()
    assert ("softmax float16 C-PRC-01 narrow-accumulator (prc02-softmax): computes in float16"
            in " ".join(text.split()))
    assert max(len(line) for line in text.splitlines()) <= 80
    again = type(jax_softmax).from_json(jax_softmax.to_json())
    assert again.outcome() == jax_softmax.outcome()
    assert again.cell("softmax", "float16").causes == jax_softmax.cell("softmax", "float16").causes
