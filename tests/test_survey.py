"""kcontract survey: tables, the conformance matrix, its renderings, the store, --compare."""
from __future__ import annotations

import json

import pytest

from kcontract.errors import UsageError
from kcontract.survey import SurveyMatrix, compare, load_table, plan, survey
from kcontract.survey.cells import CHECKED, LOST, NOT_COVERED, UNSUPPORTED, CellResult, ClassVerdict
from kcontract.survey.render import matrix_html
from kcontract.survey.table import available_tables, import_dotted, parse_table

OPS = ["sum", "embedding", "gelu"]
DTYPES = ["float32", "float16"]


@pytest.fixture(scope="module")
def numpy_matrix(tmp_path_factory):
    store = tmp_path_factory.mktemp("survey") / "results.db"
    m = survey("numpy", ops=OPS, dtypes=DTYPES, store=str(store))
    return m, store


def test_every_shipped_table_names_ops_of_the_suite_and_real_functions():
    from kcontract.ops import OPS as SUITE_OPS
    assert set(available_tables()) >= {"numpy", "torch", "jax"}
    for fw in available_tables():
        t = load_table(fw)
        assert t.framework == fw and t.dtypes
        for op, impl in t.entries.items():
            assert op in SUITE_OPS, f"{fw}: {op} is not an op of the suite"
            if fw == "numpy":
                assert callable(import_dotted(impl.function))


def test_a_malformed_table_is_a_clear_error():
    with pytest.raises(UsageError, match="ops.sum: an entry needs at least `function:`"):
        parse_table({"framework": "x", "dtypes": ["float32"], "ops": {"sum": {"kwargs": {}}}})
    with pytest.raises(UsageError, match="unknown dtype 'float33'"):
        parse_table({"framework": "x", "dtypes": ["float33"], "ops": {}})
    with pytest.raises(UsageError, match=r"unknown key\(s\) wraper"):
        parse_table({"ops": {"sum": {"function": "numpy.sum", "wraper": "x:y"}}})


def test_plan_marks_ops_without_an_entry_not_covered_and_unsurveyed_dtypes_unsupported():
    ops, dtypes, cells, decided = plan("numpy", ops=["sum", "gelu", "cast"],
                                       dtypes=["float32", "float16"])
    states = {(r.op, r.dtype): r.status for r in decided}
    assert states == {("gelu", "float32"): NOT_COVERED, ("gelu", "float16"): NOT_COVERED,
                      ("cast", "float32"): UNSUPPORTED}
    assert sorted(c.key for c in cells) == [("cast", "float16"), ("sum", "float16"),
                                            ("sum", "float32")]


def test_every_op_of_the_suite_is_in_the_default_plan():
    from kcontract.ops import OPS as SUITE_OPS
    ops, _, cells, decided = plan("numpy")
    assert ops == list(SUITE_OPS)  # an op added to the suite shows up, covered or not
    assert {r.op for r in decided if r.status == NOT_COVERED} == set(SUITE_OPS) - set(
        load_table("numpy").entries)


@pytest.mark.parametrize("kw, match", [
    ({"framework": "nump"}, "did you mean numpy"),
    ({"framework": "numpy", "device": "cuda"}, "names its devices cpu"),
    ({"framework": "numpy", "ops": ["matmull"]}, "did you mean matmul"),
    ({"framework": "numpy", "dtypes": ["int8"]}, "int8"),
    ({"framework": "numpy", "classes": ["C-PRC-9"]}, "unknown contract class"),
])
def test_bad_arguments_are_usage_errors(kw, match):
    with pytest.raises(UsageError, match=match):
        plan(**kw)


def test_the_matrix_has_every_cell_with_verdicts_per_class(numpy_matrix):
    m, _ = numpy_matrix
    assert set(m.cells) == {(op, dt) for op in OPS for dt in DTYPES}
    assert m.cell("gelu", "float32").status == NOT_COVERED
    s = m.cell("sum", "float32")
    assert s.status == CHECKED and s.function == "numpy.sum(axis=-1)"
    assert len(s.classes) == 12 and s.classes["C-EXC-02"].verdict == "none"  # no such contract
    assert s.classes["C-ORD-02"].verdict == "pass"
    # numpy.take wraps negative indices where raising is declared: C-EXC-02, with its cause
    e = m.cell("embedding", "float32")
    assert e.verdict == "violation"
    assert e.primary[0] == "C-EXC-02" and e.primary[1].code == "C-EXC-02.oob-policy"
    assert "wrap" in e.primary[1].message and e.primary[1].reproduce.startswith("kcontract check")
    assert m.backend_level() == 0 and m.levels()[("sum", "float32")] == 3


def test_every_checked_cell_is_in_the_store(numpy_matrix):
    from kcontract.records.store import history, load_run
    m, store = numpy_matrix
    checked = [c for c in m.cells.values() if c.status == CHECKED]
    runs = history(str(store))
    assert sorted(r.id for r in runs) == sorted(c.run_id for c in checked)
    for c in checked:
        stored = load_run(c.run_id, str(store))
        assert (stored["op"], stored["dtype"], stored["framework"]) == (c.op, c.dtype, "numpy")
        assert stored["kernel"] == f"kcontract.survey.implementations:numpy.{c.op}"


def test_json_round_trip_keeps_the_outcome(numpy_matrix, tmp_path):
    m, _ = numpy_matrix
    data = json.loads(json.dumps(m.to_json()))
    again = SurveyMatrix.from_json(data)
    assert again.outcome() == m.outcome()
    assert data["counts"] == m.counts() and data["backend_level"] == 0
    assert "run" not in data["cells"][0]
    with pytest.raises(UsageError, match="not a survey"):
        SurveyMatrix.from_json({"schema": "kcontract.run/1"}, "x.json")


def test_html_heat_map_names_the_primary_cause(numpy_matrix):
    m, _ = numpy_matrix
    page = matrix_html(m)
    assert page.startswith("<!doctype html>") and "kcontract survey: numpy cpu" in page
    assert "oob-policy" in page and "not covered" in page
    assert page.count("<tr>") == 1 + len(OPS) * len(DTYPES)


def _cell(op, dtype, verdict, code=""):
    classes = {"C-PRC-01": ClassVerdict("pass", ("prc01",)),
               "C-PRC-03": ClassVerdict(verdict, ("prc03",), code=code, message=code)}
    return CellResult(op, dtype, CHECKED, classes=classes,
                      verdict="conformant" if verdict == "pass" else verdict)


def test_compare_puts_differences_first():
    a = SurveyMatrix("jax", "cpu", ["sum", "gelu"], ["float32"], ["C-PRC-01", "C-PRC-03"])
    b = SurveyMatrix("torch", "cpu", ["sum", "gelu"], ["float32"], ["C-PRC-01", "C-PRC-03"])
    a.cells = {("sum", "float32"): _cell("sum", "float32", "violation", "C-PRC-03.subnormal-flush"),
               ("gelu", "float32"): _cell("gelu", "float32", "pass")}
    b.cells = {("sum", "float32"): _cell("sum", "float32", "pass"),
               ("gelu", "float32"): CellResult("gelu", "float32", LOST, error="node died")}
    rows = compare(a, b)
    assert [(r.op, r.cls, r.differs) for r in rows] == [
        ("gelu", "", True), ("sum", "C-PRC-03", True), ("sum", "C-PRC-01", False)]
    assert rows[1].a == "violation (C-PRC-03.subnormal-flush)" and rows[1].b == "pass"
    assert rows[0].b == "lost" and rows[0].b_cause == "node died"


def test_cli_survey_and_compare(run_cli, tmp_path, numpy_matrix):
    out = tmp_path / "np.json"
    html = tmp_path / "np.html"
    code, stdout, _ = run_cli("survey", "--framework", "numpy", "--ops", "sum", "--dtypes",
                              "float32", "--json", out, "--html", html, "--no-store")
    assert code == 0, stdout
    assert "numpy cpu" in stdout and "conformant" in stdout
    one = json.loads(out.read_text())
    assert [c["verdict"] for c in one["cells"]] == ["conformant"] and html.exists()
    both = tmp_path / "both.json"
    both.write_text(json.dumps(numpy_matrix[0].to_json()))
    code, stdout, _ = run_cli("survey", "--compare", out, both, "--differences-only")
    assert code == 0 and "entries differ" in stdout
    code, _, stderr = run_cli("survey", "--framework", "numpy", "--workers", "2", "--ray", "local")
    assert code == 2 and "choose one" in stderr
    code, _, stderr = run_cli("survey")
    assert code == 2 and "--framework is required" in stderr


def test_cli_exit_code_is_1_on_a_violation(run_cli):
    code, stdout, _ = run_cli("survey", "--framework", "numpy", "--ops", "embedding",
                              "--dtypes", "float32", "--no-store", "--contract", "C-EXC-02")
    assert code == 1 and "oob-policy" in stdout


def test_torch_table_covers_the_newer_ops_and_names_their_causes():
    pytest.importorskip("torch")
    m = survey("torch", "cpu", ops=["silu_mul", "cumsum", "topk"], dtypes=["float32", "float16"],
               record_runs=False)
    assert m.cell("cumsum", "float32").verdict == "conformant"
    assert m.cell("topk", "float32").function.startswith("torch.topk")
    # 16-bit top-k rows of random draws tie; tie order has no class yet: not surveyed
    assert m.cell("topk", "float16").status == "unsupported"
    # F.silu(gate) * up rounds silu's result to float16: the working precision, one cause
    s = m.cell("silu_mul", "float16")
    assert [c["class"] for c in s.causes] == ["C-PRC-01"]
    assert "conforms if declared accumulate=float16" in s.hints
