"""kcontract.trace: the coverage table, the .kct file, judging one recorded call, the
alignment, and tracing / checking a one-layer model."""
from pathlib import Path

import numpy as np
import pytest

from kcontract.errors import UsageError
from kcontract.trace import Trace, Trial, coverage
from kcontract.trace.compare import align, rel_distance
from kcontract.trace.coverage import OpCall, op_call, packet, target
from kcontract.trace.judge import judge_call

MODELS = Path(__file__).parent / "trace_models"
EXAMPLE = Path(__file__).parents[1] / "examples" / "tiny_lm"


def rec(op, module="", status="ok"):
    return {"op": op, "module": module, "status": status, "args": [], "kwargs": {}}


def test_the_table_maps_the_ops_the_issue_names():
    want = {"aten.mm.default": "matmul", "aten.addmm.default": "matmul",
            "aten.bmm.default": "matmul", "aten.linear.default": "matmul",
            "aten._softmax.default": "softmax", "aten.native_layer_norm.default": "layernorm",
            "aten._fused_rms_norm.default": "rmsnorm", "aten.gelu.default": "gelu",
            "aten.silu.default": "silu", "aten.embedding.default": "embedding",
            "aten._scaled_dot_product_flash_attention_for_cpu.default": "attention",
            "aten._scaled_dot_product_efficient_attention.default": "attention",
            "aten.sum.dim_IntList": "sum", "aten.mean.dim": "sum", "aten.cumsum.default": "cumsum",
            "aten.topk.default": "topk", "aten.convolution.default": "conv2d",
            "aten.nll_loss_forward.default": "cross_entropy", "aten._to_copy.default": "cast"}
    for op, kc in want.items():
        assert target(op) is not None and target(op).op == kc, op
    assert packet("aten.sum.dim_IntList") == "aten.sum"
    assert target("aten.add.Tensor") is None


def test_coverage_counts_and_marks_what_kcontract_cannot_check_yet():
    from kcontract.ops import OPS
    ops = [rec("aten.addmm.default")] * 3 + [rec("aten.view.default")] * 4 + \
        [rec("aten.add.Tensor")] + [rec("aten.silu.default")]
    cov = coverage(ops)
    assert (cov.calls, cov.data_movement, cov.computing, cov.covered) == (9, 4, 5, 4)
    assert cov.share() == pytest.approx(4 / 5)
    states = {r["aten"]: r["state"] for r in cov.rows}
    assert states["aten.addmm"] == "checkable" and states["aten.add"] == "not covered"
    assert states["aten.view"] == "data movement"
    assert states["aten.silu"] == ("checkable" if "silu" in OPS else "not yet checkable")


def _addmm_record(a, b, c, out):
    tensors = {}

    def ref(x):
        tensors[str(id(x))] = x
        return {"tensor": {"sha256": str(id(x)), "shape": list(x.shape)}}
    r = {"op": "aten.addmm.default", "module": "fc", "status": "ok",
         "args": [ref(c), ref(a), ref(b)], "kwargs": {}, "outputs": [ref(out)]}
    return r, tensors


def _rounded_bf16(x):
    import ml_dtypes
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def test_a_recorded_addmm_with_bfloat16_operands_violates_and_names_the_format():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 96)).astype(np.float32)
    b = rng.standard_normal((96, 8)).astype(np.float32)
    c = rng.standard_normal(8).astype(np.float32)
    honest = (a.astype(np.float64) @ b + c).astype(np.float32)
    coerced = (_rounded_bf16(a).astype(np.float64) @ _rounded_bf16(b) + c).astype(np.float32)
    for out, verdict in ((honest, "pass"), (coerced, "violation")):
        r, tensors = _addmm_record(a, b, c, out)
        call = op_call(r, tensors)
        assert call.op == "matmul" and call.dtype == "float32"
        js = {j.contract_class: j for j in judge_call(call)}
        assert {"C-PRC-01", "C-PRC-04"} <= set(js)
        assert js["C-PRC-01"].verdict == verdict
        if verdict == "violation":
            assert js["C-PRC-01"].ratio > 1
            assert js["C-PRC-01"].cause["operand_format"] == "bfloat16"
            assert js["C-PRC-01"].cause["code"] == "C-PRC-04.operand-substitution"
        else:
            assert js["C-PRC-01"].ratio <= 1


def test_out_of_range_ids_raise_clamp_and_the_declared_policy():
    rng = np.random.default_rng(0)
    table = rng.standard_normal((10, 4)).astype(np.float32)
    idx = np.array([1, 10, 3], dtype=np.int64)
    clamped = table[np.clip(idx, 0, 9)]
    call = OpCall("embedding", {"table": table, "indices": idx}, clamped, dtype="float32")
    [j] = [j for j in judge_call(call) if j.contract_class == "C-EXC-02"]
    assert j.verdict == "violation" and j.cause["observed"] == "clamp"
    assert "ids >= V = 10" in j.message
    [j] = [j for j in judge_call(call, declare={"oob": "clamp"}) if j.contract_class == "C-EXC-02"]
    assert j.verdict == "pass"
    raised = OpCall("embedding", {"table": table, "indices": idx}, None, dtype="float32")
    js = judge_call(raised, raised="IndexError")
    assert [(j.contract_class, j.verdict) for j in js] == [("C-EXC-02", "pass")]
    # in range: C-EXC-02 has nothing to say, and a gather copies rows exactly
    ok = OpCall("embedding", {"table": table, "indices": idx % 10}, table[idx % 10], dtype="float32")
    assert all(j.contract_class != "C-EXC-02" for j in judge_call(ok))


def test_alignment_survives_an_extra_op_on_one_side():
    a = [rec("aten.mm.default", "x"), rec("aten.gelu.default", "x"), rec("aten.mm.default", "y")]
    b = [a[0], rec("aten.clone.default", "x"), a[1], a[2]]
    pairs = align(a, b)
    assert (0, 0) in pairs and (1, 2) in pairs and (2, 3) in pairs and (None, 1) in pairs


def test_relative_distance():
    x = np.array([3.0, 4.0])
    assert rel_distance(x, x) == 0.0
    assert rel_distance(x, np.array([3.0, 4.5])) == pytest.approx(0.1)
    assert rel_distance(x, np.array([1.0])) == float("inf")


def test_kct_round_trip_and_bad_files(tmp_path):
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    tr = Trace({"label": "x", "seed": 0}, [rec("aten.mm.default")],
               [Trial(0, 7, "ok", 0, 1, [np.array([1, 2])], arr)], {"abc": arr})
    back = Trace.load(tr.save(str(tmp_path / "t.kct")))
    assert back.label == "x" and back.ops[0]["op"] == "aten.mm.default"
    assert np.array_equal(back.trials[0].output, arr) and back.trials[0].seed == 7
    assert np.array_equal(back.tensors["abc"], arr)
    (tmp_path / "bad.kct").write_text("not a zip")
    with pytest.raises(UsageError, match="not a kcontract trace"):
        Trace.load(str(tmp_path / "bad.kct"))
    with pytest.raises(UsageError, match="no such trace"):
        Trace.load(str(tmp_path / "missing.kct"))


torch = pytest.importorskip("torch")


def test_trace_records_ops_modules_and_tensors(tmp_path):
    from kcontract.trace import trace_model
    tr = trace_model(str(MODELS / "linear.py"), trials=2)
    assert [t.status for t in tr.trials] == ["ok", "ok"]
    addmm = [r for r in tr.ops if r["op"] == "aten.addmm.default"]
    assert len(addmm) == 2 and {r["module"] for r in addmm} == {"fc"}
    x = addmm[0]["args"][1]["tensor"]
    assert x["shape"] == [8, 48] and x["dtype"] == "float32" and x["strides"] == [48, 1]
    assert x["stored"] and len(x["sha256"]) == 64 and "absmax" in x["summary"]
    # the weights are seeded: a second trace builds the same model and inputs
    again = trace_model(str(MODELS / "linear.py"), trials=2)
    assert [r["outputs"][0]["tensor"]["sha256"] for r in again.ops if r["op"] == addmm[0]["op"]] \
        == [r["outputs"][0]["tensor"]["sha256"] for r in addmm]
    assert tr.manifest["coverage"]["share_covered"] == 1.0


def test_trace_usage_errors(tmp_path):
    from kcontract.trace import trace_model
    with pytest.raises(UsageError, match="no such model file"):
        trace_model(str(tmp_path / "nope.py"))
    with pytest.raises(UsageError, match="defines no Model"):
        trace_model(str(MODELS / "no_model.py"))
    with pytest.raises(UsageError, match="no such prelude"):
        trace_model(str(MODELS / "linear.py"), prelude=str(tmp_path / "nope.py"))


def test_check_runs_the_suite_at_the_model_shape_with_the_recorded_inputs():
    from kcontract.trace import trace_model
    from kcontract.trace.check import check_trace
    prelude = str(EXAMPLE / "stack_medium_clamp.py")
    tr = trace_model(str(MODELS / "linear.py"), prelude=prelude)
    res = check_trace(tr, prelude=prelude, classes=["C-PRC-01", "C-ORD-02"])
    [c] = res.checks
    assert (c.op, c.dtype, c.shape) == ("matmul", "float32", {"M": 8, "K": 48, "N": 16, "B": 0})
    by_id = {r["id"]: r for r in c.run["results"]}
    assert set(by_id) == {"prc01-matmul", "ord02-matmul"}
    assert by_id["prc01-matmul"]["verdict"] == "violation"
    cases = by_id["prc01-matmul"]["details"]["cases"]
    assert {row["family"] for row in cases} >= {"recorded"}
    assert all(row["shape"]["K"] == 48 for row in cases)


def test_each_attention_variant_reads_its_own_argument_order():
    from kcontract.trace.coverage import TABLE
    q = np.zeros((1, 2, 3, 4), np.float32)
    out = [q]
    flash = TABLE["aten._scaled_dot_product_flash_attention_for_cpu"].extract
    assert flash([q, q, q, 0.0, True], {}, out).kwargs == {"causal": True}
    eff = TABLE["aten._scaled_dot_product_efficient_attention"].extract
    assert eff([q, q, q, None, True, 0.0, False], {}, out).kwargs == {"causal": False}
    assert eff([q, q, q, q, False, 0.0, True], {}, out) is None  # an attention bias
    sdpa = TABLE["aten.scaled_dot_product_attention"].extract
    assert sdpa([q, q, q, None, 0.0, True], {}, out).kwargs == {"causal": True}
    assert flash([q, q, q, 0.1, True], {}, out) is None  # dropout


def test_out_of_range_ids_named_for_what_they_are_fill_and_minus_v():
    """A NaN fill is a fill, not garbage; index -V alone, where clamping and wrapping give the
    same row, is not called clamp."""
    rng = np.random.default_rng(1)
    table = rng.standard_normal((10, 4)).astype(np.float32)
    idx = np.array([1, 12, 3], dtype=np.int64)
    filled = table[np.clip(idx, 0, 9)].copy()
    filled[1] = np.nan
    call = OpCall("embedding", {"table": table, "indices": idx}, filled, dtype="float32")
    [j] = [j for j in judge_call(call) if j.contract_class == "C-EXC-02"]
    assert j.verdict == "violation" and j.cause["observed"].startswith("fill")
    assert "garbage" not in j.message
    minus_v = np.array([2, -10, 4], dtype=np.int64)
    same = table[[2, 0, 4]]  # clamp(-10) = 0 = -10 mod 10
    call = OpCall("embedding", {"table": table, "indices": minus_v}, same, dtype="float32")
    [j] = [j for j in judge_call(call) if j.contract_class == "C-EXC-02"]
    assert j.verdict == "violation" and j.cause["observed"].startswith("clamp or wrap")
    [j] = [j for j in judge_call(call, declare={"oob": "wrap"}) if j.contract_class == "C-EXC-02"]
    assert j.verdict == "pass"
