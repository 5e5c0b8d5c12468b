"""Reports of real runs: a kernel that coerces float32 operands to float16 (the
precision fingerprint and the error curve are drawn from what the suite measured),
and the reports `kcontract check` writes."""
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kcontract.check.runner import check
from kcontract.report import write_reports

DISPUTE = Path(__file__).parents[1] / "examples" / "dispute"


def test_reports_of_a_real_violation(tmp_path):
    run = check(f"{DISPUTE / 'stack_b.py'}:matmul", op="matmul", dtype="float32",
                classes=["C-PRC-01"]).to_json()
    assert run["verdict"] == "violation"
    html, xml, md = (tmp_path / "r.html", tmp_path / "r.xml", tmp_path / "r.md")
    write_reports(run, html=str(html), junit=str(xml), markdown=str(md))
    text = html.read_text()
    kinds = re.findall(r'data-plot="([^"]+)"', text)
    assert "error-vs-length" in kinds and "sweep-map" in kinds and "fingerprint" in kinds
    root = ET.fromstring(xml.read_text())
    assert int(root.get("failures")) == sum(r["verdict"] == "violation" for r in run["results"]) >= 1
    assert "C-PRC-01" in md.read_text()


def test_check_writes_all_three_reports(run_cli, tmp_path):
    example = Path(__file__).parents[1] / "examples" / "user_contract" / "acme_matmul.contract.yaml"
    out = {k: tmp_path / f"r.{k}" for k in ("html", "xml", "md", "json")}
    code, stdout, stderr = run_cli("check", example, "--report", out["html"], "--junit", out["xml"],
                                   "--markdown", out["md"], "--json", out["json"],
                                   "--store", tmp_path / "s.db")
    assert code == 0, stdout + stderr
    run = json.loads(out["json"].read_text())
    assert ET.fromstring(out["xml"].read_text()).get("tests") == str(len(run["results"]))
    assert "conformant" in out["md"].read_text()
    assert 'data-plot="sweep-map"' in out["html"].read_text()


def test_sweep_map_shows_layout_cases_as_their_own_rows(tmp_path):
    kernels = Path(__file__).parent / "kernels" / "strides.py"
    run = check(f"{kernels}:matmul_ignores_strides", op="matmul", dtype="float32",
                classes=["C-CMP-03"]).to_json()
    html = tmp_path / "r.html"
    write_reports(run, html=str(html))
    text = html.read_text()
    assert 'data-plot="sweep-map"' in text
    # the plotted numbers: the benchmarked shape passes, its transposed and strided views fail
    assert re.search(r"M=64,K=128,N=64,B=0 \[transposed\]</td><td>normal</td><td>no", text)
    assert re.search(r"M=64,K=128,N=64,B=0 \[strided\]</td><td>normal</td><td>no", text)
    assert re.search(r"M=64,K=128,N=64,B=0</td><td>normal</td><td>yes", text)
