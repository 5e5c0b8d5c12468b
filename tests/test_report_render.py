"""Reports: HTML (self-contained, plots that carry data), JUnit XML, Markdown, for a
run with violations and for a clean run; robustness to partial runs."""
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from kcontract.check.verdict import Case, ContractResult, RunResult, Status, Violation
from kcontract.report import (render_calibration_html, render_html, render_junit,
                              render_markdown, write_reports)

REPRO = "kcontract check k.py:mm --op matmul --dtype float32 --contract C-PRC-01"


def _rows(fail_at_long: bool):
    rows = []
    for k in (16, 128, 1024):
        for fam in ("normal", "positive"):
            passed = not (fail_at_long and k == 1024)
            rows.append({"case": f"M=8,K={k},N=8 float32 family={fam} seed=1", "family": fam,
                         "shape": {"M": 8, "K": k, "N": 8}, "passed": passed,
                         "mismatched": 0 if passed else 17, "total": 64,
                         "max_abs": 1e-6 * k, "max_rel": 1e-6, "measured": 1e-6 * k,
                         "allowed": 2e-6 * k if passed else 1e-7 * k})
    return rows


def make_run(violations: bool = True) -> dict:
    case = Case(shape={"M": 8, "K": 1024, "N": 8}, dtype="float32", seed=1, family="normal")
    results = []
    if violations:
        v = Violation(contract_id="prc01-matmul", contract_class="C-PRC-01", case=case,
                      code="C-PRC-01.narrow-accumulator", message="accumulates like fp16",
                      mismatched=17, total=64, index=(3, 4), actual=1.5, expected=1.25,
                      max_abs=0.25, max_rel=0.2, allowed=1e-4, measured=0.25,
                      quantities={"recipe": "fp32 operands, fp16 accumulation"}, reproduce=REPRO)
        results.append(ContractResult(
            contract="C-PRC-01", id="prc01-matmul", verdict=Status.VIOLATION,
            message="accumulates like fp16, not the declared fp32 (3 of 6 cases fail)",
            tolerance="tol = pgamma(n, u(accumulate)) * mag + ulp(ref)", violation=v,
            signature={"code": "C-PRC-01.narrow-accumulator",
                       "recipe": "fp32 operands, fp16 accumulation", "accumulator_bits": 11.2,
                       "recipe_matches": {"fp32/fp32": 0.1, "fp32/fp16": 1.0, "tf32/fp32": 0.3},
                       "u_by_length": {"64": 4.9e-4, "256": 5.1e-4, "1024": 4.8e-4}},
            cases=6, seconds=0.5, reproduce=REPRO, details={"cases": _rows(True)}))
        results.append(ContractResult(
            contract="C-EXC-02", id="exc02-embedding", verdict=Status.ERROR,
            message="the kernel raised ValueError: boom", signature={"code": "kernel.raised"},
            cases=1, reproduce="kcontract check k.py:e --op embedding --dtype float32",
            details={"traceback": "Traceback (most recent call last):\n  ValueError: boom <&>"}))
    else:
        results.append(ContractResult(
            contract="C-PRC-01", id="prc01-matmul", verdict=Status.PASS, message="6 cases conform",
            tolerance="tol = pgamma(n, u(accumulate)) * mag + ulp(ref)", cases=6, seconds=0.4,
            reproduce=REPRO, details={"cases": _rows(False)}))
    results.append(ContractResult(contract="C-CMP-03", id="cmp03-matmul", verdict=Status.PASS,
                                  message="12 cases conform", cases=12, seconds=0.2,
                                  details={"cases": _rows(False)}))
    results.append(ContractResult(contract="C-ORD-02", id="ord02-matmul", verdict=Status.SKIPPED,
                                  message="applies only when deterministic=true is declared"))
    run = RunResult(kernel="k.py:mm", op="matmul", dtype="float32", framework="numpy",
                    device="cpu", claims={"accumulate": "float32", "deterministic": True},
                    environment={"python": "3.11", "cpu_flags": ["avx2", "fma"],
                                 "device_name": "Some CPU"},
                    results=results, kernel_hash="ab" * 32, suite_version="0.1.0", seconds=1.2)
    return json.loads(json.dumps(run.to_json()))


@pytest.fixture(params=[True, False], ids=["violations", "clean"])
def run(request):
    return make_run(request.param)


def figures(html: str) -> list[dict]:
    out = []
    for m in re.finditer(r'<figure class="plot" data-plot="([^"]+)" data-contract="([^"]*)" '
                         r'data-points="(\d+)">(.*?)</figure>', html, re.S):
        out.append({"kind": m.group(1), "contract": m.group(2), "points": int(m.group(3)),
                    "body": m.group(4)})
    return out


# -- HTML ------------------------------------------------------------------------------

def test_html_is_one_self_contained_page(run):
    html = render_html(run)
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "<link" not in html and "<img src=\"http" not in html
    assert not re.search(r'<script[^>]+src=', html)
    assert not re.search(r'(?:src|href)="https?://', html)  # only SVG namespaces name URLs
    assert f'data-verdict="{run["verdict"]}"' in html
    for r in run["results"]:
        assert r["id"] in html


def test_html_shows_each_violation_with_signature_allowed_measured_and_reproduce():
    html = render_html(make_run(True))
    card = re.search(r'<div class="card violation" id="v-prc01-matmul".*?</div>', html, re.S).group(0)
    assert "C-PRC-01.narrow-accumulator" in card
    assert "|error| 0.25 vs allowed 1.000e-04 (2.5e+03× the allowed)" in card
    assert REPRO in card
    assert "17 of 64 (26.6%)" in card
    err = re.search(r'<div class="card error".*?</div>', html, re.S).group(0)
    assert "kernel.raised" in err and "ValueError: boom &lt;&amp;&gt;" in err  # escaped


def test_html_plots_exist_and_carry_data():
    html = render_html(make_run(True))
    figs = figures(html)
    kinds = {(f["contract"], f["kind"]) for f in figs}
    assert ("prc01-matmul", "error-vs-length") in kinds
    assert ("prc01-matmul", "fingerprint") in kinds
    assert ("prc01-matmul", "effective-precision") in kinds
    assert ("prc01-matmul", "sweep-map") in kinds
    assert ("cmp03-matmul", "sweep-map") in kinds
    for f in figs:
        assert "<svg" in f["body"] and "viewBox" in f["body"]
        assert f["points"] > 0
    by = {(f["contract"], f["kind"]): f for f in figs}
    err = by[("prc01-matmul", "error-vs-length")]
    assert err["points"] == 6  # every case drawn
    assert 'id="measured-fail-0"' in err["body"] and 'id="bound-0"' in err["body"]
    assert "accumulate=float32" in err["body"]  # the declared format's bound
    assert "<td>1024</td><td>normal</td><td>0.00102</td><td>0.000102</td><td>no</td>" in err["body"]
    fp = by[("prc01-matmul", "fingerprint")]
    assert fp["points"] == 3 and "fp32/fp16" in fp["body"] and 'id="candidates"' in fp["body"]
    assert "<td>fp32/fp16</td><td>1</td><td>yes</td>" in fp["body"]
    sweep = by[("prc01-matmul", "sweep-map")]
    assert sweep["points"] == 6 and "17/64" in sweep["body"]


def test_html_clean_run_has_no_violation_section():
    html = render_html(make_run(False))
    assert "Violations and errors" not in html
    assert 'data-verdict="conformant"' in html
    assert {f["kind"] for f in figures(html)} >= {"error-vs-length", "sweep-map"}


@pytest.mark.parametrize("run_json", [
    {}, {"results": []}, {"results": [{"verdict": "violation"}]},
    {"op": "matmul", "results": [{"contract": "C-PRC-01", "id": "x", "verdict": "pass",
                                  "details": {"cases": "not a list", "curve": {"x": "junk"}},
                                  "signature": {"candidates": ["a", 3, {"name": 1}],
                                                "u_by_length": [1, 2]}}]},
    {"op": "nope", "results": [{"contract": "C-PRC-01", "id": "y", "verdict": "violation",
                                "violation": {"measured": "nan", "allowed": "inf", "index": [1]},
                                "details": {"cases": [{"shape": {"K": 4}}, {"passed": True},
                                                      {"shape": "K=3", "measured": "inf"}]}}]},
])
def test_renderers_survive_partial_runs(run_json):
    assert "<html" in render_html(run_json)
    ET.fromstring(render_junit(run_json))
    assert render_markdown(run_json).startswith("###")


def test_curve_details_are_plotted_generically():
    run = make_run(False)
    run["results"][1]["details"] = {"curve": {"x": [8, 64, 512], "y": [1e-7, 3e-7, 9e-7],
                                              "bound": [1e-6, 3e-6, 9e-6]}}
    figs = [f for f in figures(render_html(run)) if f["contract"] == "cmp03-matmul"]
    assert [f["kind"] for f in figs] == ["error-vs-length"] and figs[0]["points"] == 3


# -- JUnit -------------------------------------------------------------------------------

def test_junit_one_case_per_contract_and_counts_match(run):
    root = ET.fromstring(render_junit(run))
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [r["id"] for r in run["results"]]
    n = {v: sum(r["verdict"] == v for r in run["results"]) for v in ("violation", "error", "skipped")}
    for el in (root, suite):
        assert int(el.get("tests")) == len(run["results"])
        assert int(el.get("failures")) == n["violation"] == len(suite.findall("testcase/failure"))
        assert int(el.get("errors")) == n["error"] == len(suite.findall("testcase/error"))
        assert int(el.get("skipped")) == n["skipped"] == len(suite.findall("testcase/skipped"))
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["kernel_hash"] == "ab" * 32 and props["claim.deterministic"] == "true"


def test_junit_failure_carries_the_message_and_signature():
    root = ET.fromstring(render_junit(make_run(True)))
    case = root.find("testsuite/testcase[@name='prc01-matmul']")
    assert case.get("classname") == "kcontract.C-PRC-01"
    fail = case.find("failure")
    assert fail.get("message") == ("[cause 2 of 2: C-PRC-01] accumulates like fp16, not the "
                                   "declared fp32 (3 of 6 cases fail)")
    assert fail.get("type") == "C-PRC-01.narrow-accumulator"
    assert "measured |error| 0.25, allowed 1.000e-04" in fail.text
    assert f"reproduce: {REPRO}" in fail.text
    err = root.find("testsuite/testcase[@name='exc02-embedding']/error")
    assert "ValueError: boom" in err.text


def _substitution_run() -> dict:
    """prc04 finds fp16 operands; prc01 and exc01 follow from it (the diagnosis folds them)."""
    case = Case(shape={"M": 64, "K": 128, "N": 64}, dtype="float32", seed=1, family="normal")

    def res(cls, cid, code, message, **sig):
        v = Violation(contract_id=cid, contract_class=cls, case=case, code=code,
                      message=message, actual=1.5, expected=1.25, measured=0.25, allowed=1e-4)
        return ContractResult(contract=cls, id=cid, verdict=Status.VIOLATION,
                              message=f"{message} (4 of 4 cases fail)", violation=v,
                              signature={"code": code, **sig}, cases=4, reproduce=REPRO)
    results = [
        res("C-PRC-01", "prc01-matmul", "C-PRC-01.operand-substitution",
            "the accumulator is fp32 as declared, but the kernel ran operands rounded to fp16",
            operand_format="float16"),
        res("C-PRC-04", "prc04-matmul", "C-PRC-04.format-substitution",
            "operands rounded to fp16 before the product", operand_format="float16"),
        res("C-EXC-01", "exc01-matmul", "C-EXC-01.exceptional-values",
            "Inf where a finite value is due", counts={"spurious-inf": 127}),
    ]
    run = RunResult(kernel="k.py:mm", op="matmul", dtype="float32", framework="numpy",
                    device="cpu", claims={}, environment={}, results=results)
    return json.loads(json.dumps(run.to_json()))


def test_junit_carries_the_diagnosis_cause_first_consequences_folded():
    run = _substitution_run()
    assert [c["class"] for c in run["diagnosis"]["primary"]] == ["C-PRC-04"]
    root = ET.fromstring(render_junit(run))
    suite = root.find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["diagnosis.primary"] == "C-PRC-04"
    # the suite's output: the cause first, the explained violations folded under it
    out = suite.find("system-out").text.splitlines()
    assert out[0].startswith("✗ cause: C-PRC-04 prc04-matmul: operands rounded to fp16")
    follows = [i for i, line in enumerate(out) if "follows from it" in line]
    assert len(follows) == 2 and min(follows) > 0
    assert any("exc01-matmul follows from it" in out[i] and "65504" in out[i] for i in follows)
    # the same text the terminal and the pytest failure print
    from kcontract.diagnosis.text import cause_lines
    assert out == [line for _, line in cause_lines(run)]
    # each failure says its role: the cause lists its consequences, the others name the cause
    cause = suite.find("testcase[@name='prc04-matmul']/failure")
    assert cause.get("message").startswith("[cause: C-PRC-04] ")
    assert cause.text.splitlines()[0] == "diagnosis: cause (C-PRC-04)"
    assert "prc01-matmul follows from it" in cause.text
    for cid in ("prc01-matmul", "exc01-matmul"):
        fail = suite.find(f"testcase[@name='{cid}']/failure")
        assert fail.get("message").startswith("[follows from prc04-matmul] ")
        assert fail.text.startswith("diagnosis: follows from prc04-matmul (C-PRC-04): ")


def test_junit_strips_characters_xml_cannot_hold():
    run = make_run(True)
    run["results"][0]["message"] = "bad \x00 byte \x1b[31m"
    fail = ET.fromstring(render_junit(run)).find(".//failure")
    assert fail.get("message").endswith("] bad ? byte ?[31m")


# -- Markdown ------------------------------------------------------------------------------

def test_markdown_summary_for_a_pull_request():
    md = render_markdown(make_run(True))
    lines = md.splitlines()
    assert lines[0] == "### ⚠️ kcontract: `k.py:mm` is **error**"
    assert "| ✗ | C-PRC-01 | `prc01-matmul` | violation |" in md
    assert md.count("<details>") == 2
    assert "- signature: `C-PRC-01.narrow-accumulator`" in md
    assert "- measured |error| 0.25 vs allowed 1.000e-04 (2.5e+03× the allowed)" in md
    assert f"```sh\n{REPRO}\n```" in md
    assert len(lines) < 60


def test_markdown_clean_run():
    md = render_markdown(make_run(False))
    assert md.startswith("### ✅ kcontract: `k.py:mm` is **conformant**")
    assert "<details>" not in md


def test_a_nan_error_gets_no_ratio_in_any_report():
    run = make_run(True)
    run["results"][0]["violation"]["measured"] = "nan"
    md, page = render_markdown(run), render_html(run)
    assert "- measured |error| nan vs allowed 1.000e-04\n" in md + "\n"
    assert "× the allowed" not in md and "× the allowed" not in page
    assert 'class="ratio' not in page


def test_a_run_that_checked_nothing_is_not_called_conformant():
    run = make_run(False)
    run["results"] = [r for r in run["results"] if r["verdict"] == "skipped"]
    md, page = render_markdown(run), render_html(run)
    assert md.startswith("### ⚠️ kcontract: nothing was checked for `k.py:mm`")
    assert "applies only when deterministic=true is declared" in md
    assert "conformant" not in md
    assert 'data-verdict="nothing checked"' in page and 'data-verdict="conformant"' not in page


def test_markdown_escapes_pipes():
    run = make_run(False)
    run["results"][0]["message"] = "a | b"
    assert "a \\| b" in render_markdown(run)


# -- writing, laziness, calibration ---------------------------------------------------------

def test_write_reports_creates_folders_and_returns_paths(tmp_path):
    paths = write_reports(make_run(True), html=str(tmp_path / "a" / "r.html"),
                          junit=str(tmp_path / "b" / "r.xml"), markdown=str(tmp_path / "r.md"))
    assert paths == [str(tmp_path / "a" / "r.html"), str(tmp_path / "b" / "r.xml"),
                     str(tmp_path / "r.md")]
    assert all((tmp_path / p).exists() for p in paths)
    assert write_reports(make_run(True)) == []


def test_matplotlib_is_imported_only_to_draw():
    code = ("import sys, json; import kcontract.cli, kcontract.report as r; "
            "r.render_junit({'results': []}); r.render_markdown({'results': []}); "
            "r.render_html({'results': []}); "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


CALS = [{"contract": "C-PRC-01", "id": "prc01-matmul", "op": "matmul", "dtype": "float32",
         "framework": "numpy", "sound": True, "error": "", "seconds": 1.0,
         "cells": [{"role": "baseline", "basic": False, "verdict": "violation", "sound": True,
                    "code": "", "message": ""},
                   {"role": "bad", "basic": True, "verdict": "violation", "sound": True,
                    "code": "C-PRC-01.narrow-accumulator", "message": ""},
                   {"role": "good", "basic": True, "verdict": "pass", "sound": True, "code": "",
                    "message": ""}]},
        {"contract": "C-EXC-02", "id": "exc02-embedding", "op": "embedding", "dtype": "float32",
         "framework": "numpy", "sound": False, "error": "", "seconds": 1.0,
         "cells": [{"role": "baseline", "basic": False, "verdict": "error", "sound": True},
                   {"role": "bad", "basic": True, "verdict": "pass", "sound": False}]}]


def test_calibration_matrix_html():
    html = render_calibration_html(CALS)
    figs = figures(html)
    assert [f["kind"] for f in figs] == ["calibration"] and figs[0]["points"] == 5
    assert "1 of 2 contracts soundly calibrated" in html
    assert "C-PRC-01.narrow-accumulator" in html and "exc02-embedding" in html
    assert 'data-verdict="unsound"' in html


# -- the CLI ---------------------------------------------------------------------------------

def test_cli_report_renders_a_saved_run(run_cli, tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(make_run(True)))
    code, out, err = run_cli("report", path)
    assert code == 0 and (tmp_path / "run.html").exists(), err
    code, out, _ = run_cli("report", path, "--junit", "-", "--markdown", tmp_path / "pr.md")
    assert code == 0
    assert ET.fromstring(out.strip()).tag == "testsuites"
    assert (tmp_path / "pr.md").read_text().startswith("### ")


def test_cli_report_rejects_what_is_not_a_run(run_cli, tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    assert run_cli("report", bad)[0] == 2
    bad.write_text("{not json")
    assert run_cli("report", bad)[0] == 2
    assert run_cli("report", tmp_path / "missing.json")[0] == 2
    assert run_cli("report")[0] == 2


def test_html_plots_the_recovered_recipe_beside_each_design():
    """A C-PRC-01/04 violation that recovered a recipe: its error sweep is drawn (measured
    against K beside each design's prediction), its fields listed with confidence."""
    pytest.importorskip("matplotlib")
    from kcontract.classes.precision import recipe_quantities
    from kcontract.fingerprint import Design, fingerprint
    from kcontract.report._util import violation_lines
    d = Design(accumulator_bits=14, accumulator_rounding="toward_zero", output_format="float32")
    rec = fingerprint(d.matmul, op="matmul", dtype="float32")
    run = make_run(True)
    prc = run["results"][0]
    prc["signature"]["recovered_recipe"] = json.loads(json.dumps(recipe_quantities(rec)))
    html = render_html(run)
    by = {(f["contract"], f["kind"]): f for f in figures(html)}
    fig = by[("prc01-matmul", "recipe-sweep")]
    designs = list(rec.sweep[0].predicted)
    assert fig["points"] == len(rec.sweep) * (1 + len(designs))
    assert 'id="measured"' in fig["body"] and 'id="design-0"' in fig["body"]
    last = rec.sweep[-1]
    assert (f"<td>{last.length}</td><td>{last.measured:.3g}</td>"
            f"<td>{last.predicted[designs[0]]:.3g}</td>") in fig["body"]
    assert rec.summary() in fig["body"]
    card = re.search(r'<div class="card violation" id="v-prc01-matmul".*?</div>', html,
                     re.S).group(0)
    assert "recovered recipe" in card
    assert "<td>accumulator_bits</td><td>14</td>" in card
    assert "<td>accumulator_rounding</td><td>toward_zero</td>" in card
    # the terminal and JUnit lines show the summary, not the whole record
    sig_line = next(line for line in violation_lines(prc) if "signature:" in line)
    assert f"recovered_recipe={rec.summary()}"[:60] in sig_line and "'sweep'" not in sig_line
    # a run without one draws none
    assert ("prc01-matmul", "recipe-sweep") not in {
        (f["contract"], f["kind"]) for f in figures(render_html(make_run(True)))}


def test_terminal_names_limits_no_cgroup_enforces(run):
    """A sandboxed run whose memory limit nothing enforced says so under the verdict, with
    the reason; limits that are enforced, or a run without the sandbox, print no such line."""
    import io
    from rich.console import Console
    from kcontract.cli.render import print_run

    def printed(data):
        buf = io.StringIO()
        print_run(data, Console(file=buf, width=200))
        return buf.getvalue()

    data = json.loads(json.dumps(run))
    data["sandbox"] = "bubblewrap"
    data["limits"] = {"memory": {"limit": 1 << 30, "enforced": "no",
                                 "why": "no writable cgroup hierarchy"},
                      "processes": {"limit": 4096, "enforced": "cgroup v1"}}
    out = printed(data)
    assert "limits not enforced: memory (no writable cgroup hierarchy)" in out
    assert "processes" not in out.split("limits not enforced:")[1]
    data["limits"]["memory"]["enforced"] = "cgroup v1"
    assert "limits not enforced" not in printed(data)
    data["limits"]["memory"]["enforced"] = "no"
    data["sandbox"] = "none"
    assert "limits not enforced" not in printed(data)
