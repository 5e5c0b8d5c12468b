"""The whole-model case study (examples/tiny_lm) end to end through the command line:
the reference stack against the stack with medium matmul precision and a clamping
embedding, and the reference against a second trace of itself; the HTML report in a
real browser."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")

EXAMPLE = Path(__file__).parents[1] / "examples" / "tiny_lm"
TRIALS = 6
BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome",
                                          "google-chrome-stable") if shutil.which(b)), None)


def cli(*args):
    from click.testing import CliRunner
    from kcontract.cli import main
    res = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return res.exit_code, res.stdout


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny_lm")
    model = EXAMPLE / "model.py"
    out = {}
    for name, extra in (("ref", ["--label", "reference"]),
                        ("stack", ["--label", "medium+clamp", "--prelude",
                                   EXAMPLE / "stack_medium_clamp.py"]),
                        ("again", ["--label", "reference-again"])):
        code, text = cli("trace", model, "--out", d / f"{name}.kct", "--trials", TRIALS, *extra)
        assert code == 0, text
        assert "coverage:" in text
        out[name] = d / f"{name}.kct"
    out["dir"] = d
    return out


@pytest.fixture(scope="module")
def compared(traces):
    report = traces["dir"] / "report.html"
    code, text = cli("compare-traces", traces["ref"], traces["stack"], "--json",
                     "--report", report)
    return code, json.loads(text), report


def test_the_disagreement_is_attributed_to_the_right_side_and_contract(compared):
    code, data, report = compared
    assert code == 1
    assert data["violators"] == ["medium+clamp"]
    ag = data["agreement"]
    assert ag["kind"] == "language model"
    # the trials in which the reference raised at the embedding (an out-of-range id) count
    # as disagreeing; the matmuls' rounding flips few tokens
    raised = [o["trial"] for o in ag["one_sided"]]
    assert raised and all(o["raised"] == "reference" for o in ag["one_sided"])
    assert 0 < ag["next_token"]["percent"] < 100 and 0 < ag["top1"]["percent"] < 100
    sites = {s["module"]: s for s in data["sites"] if s["violations"]}
    matmuls = [s for s in sites.values() if s["kcontract_op"] == "matmul"]
    assert len(matmuls) == 9  # 2 blocks x (qkv, proj, up, down) + the head
    for s in matmuls:
        assert {(v["side"], v["contract_class"]) for v in s["violations"]} == {
            ("medium+clamp", "C-PRC-01"), ("medium+clamp", "C-PRC-04")}
        assert {v["operand_format"] for v in s["violations"]} == {"bfloat16"}
        assert {v["code"] for v in s["violations"]} == {"C-PRC-04.operand-substitution"}
    [emb] = [v for v in sites["embed"]["violations"]]
    assert (emb["side"], emb["contract_class"]) == ("medium+clamp", "C-EXC-02")
    assert "observed clamp" in emb["summary"]
    # what the matmuls feed conforms on both sides: the difference propagated
    others = [s for s in data["sites"] if s["kcontract_op"] in ("layernorm", "attention", "gelu")]
    assert others and all(set(s["causes"]) == {"propagated"} for s in others)
    for t in data["trials"]:
        p = t["first_parting"]
        if t["trial"] in raised:
            assert (p["op"], p["module"]) == ("aten.embedding.default", "embed")
            assert t["primary_cause"]["contract_class"] == "C-EXC-02"
        else:
            assert (p["op"], p["module"]) == ("aten.addmm.default", "blocks.0.qkv")
            assert p["same_inputs"] and p["bound_ratio"] > 1
            assert t["primary_cause"]["contract_class"] == "C-PRC-04"  # shown by C-PRC-01 and C-PRC-04
            assert t["primary_cause"]["shown_by"] in ("C-PRC-01", "C-PRC-04")
    assert report.exists()


def test_an_identical_second_trace_agrees_completely(traces):
    code, text = cli("compare-traces", traces["ref"], traces["again"], "--json")
    assert code == 0
    data = json.loads(text)
    assert data["violators"] == [] and data["ops_differing"] == 0
    assert data["agreement"]["next_token"]["percent"] == 100.0
    assert data["agreement"]["top1"]["percent"] == 100.0
    assert all(t["first_parting"] is None for t in data["trials"])
    code, text = cli("compare-traces", traces["ref"], traces["again"])
    assert "violators: none" in text and "100.0 %" in text


@pytest.mark.skipif(BROWSER is None, reason="headless Chromium is not installed")
def test_the_comparison_report_renders_in_headless_chromium(compared):
    _, data, page = compared
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-extensions",
           "--virtual-time-budget=5000", "--dump-dom", page.as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    assert 'data-plots-rendered="1/1"' in dom
    assert f'data-agreement="{data["agreement"]["next_token"]["percent"]:.1f}"' in dom
    assert 'data-site="embed|aten.embedding.default"' in dom and "C-EXC-02" in dom
    assert "at fault: medium+clamp" in dom


def test_the_demo_expectations_hold_and_fail_when_they_should(compared, traces):
    from kcontract.trace.compare import compare_traces
    from kcontract.cli.demo_tiny_lm import expectations
    _, data, _ = compared
    same = compare_traces(str(traces["ref"]), str(traces["again"])).to_json()
    assert expectations(data, same) == []
    # a "same" comparison that disagrees, and violations on the wrong side, are caught
    assert any("do not agree" in p for p in expectations(data, data))
    swapped = dict(data, violators=["reference"])
    assert expectations(swapped, same)
