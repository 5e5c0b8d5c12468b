"""The package layout shows what is what: records together (kcontract.records), integrations
together (kcontract.integrations), the claims with the language, the demo in the command
line, and the package root holding only what everything else shares."""
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).parents[1] / "src" / "kcontract"

#: modules of the package root: shared by the whole package
ROOT_MODULES = {"__init__", "__main__", "errors", "files", "formats", "frameworks"}


def test_records_and_integrations_are_packages_of_their_own():
    assert {p.stem for p in (PKG / "records").glob("*.py")} == {
        "__init__", "store", "certify", "arbitrate", "signing"}
    assert (PKG / "integrations" / "pytest_plugin.py").is_file()
    assert (PKG / "integrations" / "kernelbench" / "check.py").is_file()
    assert (PKG / "language" / "claims.py").is_file()
    assert (PKG / "cli" / "demo.py").is_file()


def test_the_package_root_holds_no_records_integrations_claims_or_demo():
    root = {p.stem for p in PKG.glob("*.py")}
    assert not root & {"store", "certify", "arbitrate", "signing", "pytest_plugin", "claims",
                       "demo"}
    assert root <= ROOT_MODULES, sorted(root - ROOT_MODULES)
    assert not (PKG / "trace" / "demo.py").exists()  # the whole-model case study: cli/


def test_no_compatibility_shims_left_behind():
    from importlib.util import find_spec
    for name in ("store", "certify", "arbitrate", "signing", "pytest_plugin", "claims", "demo"):
        assert find_spec(f"kcontract.{name}") is None, name


def test_the_packages_import_nothing_on_their_own():
    code = ("import sys, kcontract.records, kcontract.integrations; "
            "print(sorted(m for m in sys.modules if m.startswith('kcontract.') and m not in "
            "('kcontract.records', 'kcontract.integrations', 'kcontract.errors')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_the_demo_plan_is_data_in_examples(tmp_path, monkeypatch):
    import pytest
    from kcontract.cli.demo import load_plan
    from kcontract.errors import UsageError
    monkeypatch.chdir(tmp_path)  # found from the package too, not only from the repository root
    plan = load_plan()
    assert plan.base == PKG.parents[1] / "examples"
    for cs in plan.case_studies:
        assert (plan.base / cs.kernel.split(":")[0]).is_file(), cs.key
    (tmp_path / "demo.yaml").write_text("case_studies: [{key: x}]\ndisputes: []\n")
    with pytest.raises(UsageError, match="malformed demo plan"):
        load_plan(tmp_path)
