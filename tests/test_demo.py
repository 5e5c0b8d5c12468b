"""`make demo`'s job: every case study and every dispute is diagnosed as the story says."""
import json
import re

from rich.console import Console

from kcontract.cli.demo import load_plan, run_demo


def test_demo_diagnoses_every_case_study_and_dispute(tmp_path):
    plan = load_plan()  # examples/demo.yaml
    cases = plan.case_studies
    disputes = [(d.op, d.cls, d.at_fault) for d in plan.disputes]
    assert len(cases) == 6 and len(disputes) == 3
    console = Console(record=True, width=120)
    # the whole-model case study has its own test (tests/test_trace_demo.py)
    assert run_demo(str(tmp_path), calibration=False, whole_model=False, console=console)
    text = console.export_text()
    assert f"case studies diagnosed as expected: {len(cases)} of {len(cases)}" in text
    for cs in cases:
        run = json.loads((tmp_path / f"{cs.key}.json").read_text())
        assert run["verdict"] == cs.expect, cs.key
        assert (tmp_path / f"{cs.key}.html").stat().st_size > 1000
    for op, cls, expected in disputes:
        arb = json.loads((tmp_path / f"dispute-{op}.json").read_text())
        assert arb["violators"] == ([expected] if expected else []), op
        assert {r["contract"] for r in arb["contracts"]} == {cls}
        assert (tmp_path / f"dispute-{op}.html").exists()
    assert "stack B violates C-PRC-01" in text
    assert "stack A violates C-EXC-02" in text
    index = (tmp_path / "index.html").read_text()
    links = re.findall(r'<a href="([^"]+)">', index)
    assert sorted(links) == sorted([f"{cs.key}.html" for cs in cases]
                                   + [f"dispute-{op}.html" for op, _, _ in disputes])
    assert all((tmp_path / link).exists() for link in links)
    assert "NOT AS EXPECTED" not in index
    assert index.count('data-verdict="violation"') == (
        sum(cs.expect == "violation" for cs in cases)
        + sum(expected is not None for _, _, expected in disputes))
