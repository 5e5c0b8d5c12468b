"""`make demo`'s job: every case study and every dispute is diagnosed as the story says."""
import json
import re

from rich.console import Console

from kcontract.cli.demo import CASE_STUDIES, DISPUTES, run_demo


def test_demo_diagnoses_every_case_study_and_dispute(tmp_path):
    console = Console(record=True, width=120)
    # the whole-model case study has its own test (tests/test_trace_demo.py)
    assert run_demo(str(tmp_path), calibration=False, whole_model=False, console=console)
    text = console.export_text()
    assert f"case studies diagnosed as expected: {len(CASE_STUDIES)} of {len(CASE_STUDIES)}" in text
    for cs in CASE_STUDIES:
        run = json.loads((tmp_path / f"{cs.key}.json").read_text())
        assert run["verdict"] == cs.expect, cs.key
        assert (tmp_path / f"{cs.key}.html").stat().st_size > 1000
    for op, cls, expected in DISPUTES:
        arb = json.loads((tmp_path / f"dispute-{op}.json").read_text())
        assert arb["violators"] == ([expected] if expected else []), op
        assert {r["contract"] for r in arb["contracts"]} == {cls}
        assert (tmp_path / f"dispute-{op}.html").exists()
    assert "stack B violates C-PRC-01" in text
    assert "stack A violates C-EXC-02" in text
    index = (tmp_path / "index.html").read_text()
    links = re.findall(r'<a href="([^"]+)">', index)
    assert sorted(links) == sorted([f"{cs.key}.html" for cs in CASE_STUDIES]
                                   + [f"dispute-{op}.html" for op, _, _ in DISPUTES])
    assert all((tmp_path / link).exists() for link in links)
    assert "NOT AS EXPECTED" not in index
    assert index.count('data-verdict="violation"') == (
        sum(cs.expect == "violation" for cs in CASE_STUDIES)
        + sum(expected is not None for _, _, expected in DISPUTES))
