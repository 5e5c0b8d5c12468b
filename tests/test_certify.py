"""Certification: certify and verify-certificate round-trip; a tampered certificate
or a changed kernel is rejected; --rerun reproduces the verdicts."""
import json
import shutil
from pathlib import Path

import pytest

from kcontract.records.certify import (LEVELS, achieved_level, certify, content_hash, level_classes,
                               seal, verify_certificate)
from kcontract.errors import UsageError

TESTS = Path(__file__).parent
SANDBOXED = __import__("kcontract.check.jail", fromlist=["detect"]).detect().isolated
CORRECT = TESTS / "kernels" / "correct_numpy.py"
COERCING = TESTS.parent / "examples" / "dispute" / "stack_b.py"


def test_levels_nest_and_cover_the_families():
    assert set(LEVELS[1]) == {"C-EXC-01", "C-EXC-02", "C-CMP-03"}
    assert set(LEVELS[1]) < set(LEVELS[2]) < set(LEVELS[3])
    assert {c for c in LEVELS[2] if c.startswith("C-PRC")} == {f"C-PRC-0{i}" for i in range(1, 5)}
    from kcontract.classes import CLASSES
    assert set(LEVELS[3]) == set(CLASSES)
    with pytest.raises(UsageError):
        level_classes(4)


def test_achieved_level():
    v = [{"contract": "C-EXC-01", "verdict": "pass"}, {"contract": "C-PRC-01", "verdict": "violation"},
         {"contract": "C-ORD-02", "verdict": "skipped"}]
    assert achieved_level(v, 3) == 1
    v[1]["verdict"] = "pass"
    assert achieved_level(v, 3) == 3 and achieved_level(v, 2) == 2
    v[0]["verdict"] = "error"
    assert achieved_level(v, 3) == 0


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    """A conforming kernel (a copy, so the test can edit it), certified at level 2."""
    from click.testing import CliRunner
    from kcontract.cli import main
    d = tmp_path_factory.mktemp("cert")
    shutil.copy(CORRECT, d / "kern.py")
    out = d / "out" / "cert.json"
    res = CliRunner().invoke(main, ["certify", f"{d / 'kern.py'}:matmul", "--op", "matmul",
                                    "--dtype", "float32", "--level", "2", "--out", str(out),
                                    "--declare", "accumulate=float32", "--seed", "3"]
                        + ([] if SANDBOXED else ["--allow-unsandboxed"]))
    return d, out, res


def test_certify_writes_a_certificate(certified):
    d, out, res = certified
    assert res.exit_code == 0, res.output
    assert "certified at level 2" in res.output
    cert = json.loads(out.read_text())
    assert cert["schema"] == "kcontract.certificate/1" and cert["certified"] is True
    assert cert["level"] == 2 and cert["level_achieved"] == 2
    assert cert["kernel"]["sha256"] and cert["kernel"]["spec"].endswith("kern.py:matmul")
    assert cert["suite_version"] and cert["environment"]["cpu"]
    assert cert["claims"]["accumulate"] == "float32" and cert["declare"] == {"accumulate": "float32"}
    assert cert["seed"] == 3
    assert cert["verdicts"] and all(v["verdict"] in ("pass", "skipped") for v in cert["verdicts"])
    assert {v["contract"] for v in cert["verdicts"]} <= set(LEVELS[2])
    assert any(v["contract"].startswith("C-PRC") for v in cert["verdicts"])
    assert cert["content_hash"] == content_hash(cert)
    html = (d / "out" / "cert.html").read_text()
    assert cert["content_hash"] in html and "certified" in html


def test_verify_round_trip_and_rerun(certified, run_cli):
    d, out, _ = certified
    code, text, _ = run_cli("verify-certificate", out)
    assert code == 0 and "certificate verified" in text
    assert "kernel source" in text and "sha256 matches" in text
    code, text, _ = run_cli("verify-certificate", out, "--rerun")
    assert code == 0, text
    assert "verdicts reproduced on this machine" in text


def test_reformatting_keeps_the_hash(certified, tmp_path):
    _, out, _ = certified
    cert = json.loads(out.read_text())
    again = tmp_path / "c.json"
    again.write_text(json.dumps(dict(reversed(list(cert.items())))))  # other order, no indent
    assert verify_certificate(str(again)).checks[0].ok is True


def test_a_tampered_certificate_is_rejected(certified, run_cli, tmp_path):
    _, out, _ = certified
    cert = json.loads(out.read_text())
    cert["verdicts"][0]["verdict"] = "violation"  # edit a verdict
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(cert, indent=2))
    code, text, _ = run_cli("verify-certificate", bad)
    assert code == 1
    assert "modified after it was issued" in text and "REJECTED" in text
    cert = json.loads(out.read_text())
    cert["level"] = 3  # or claim more than was certified
    bad.write_text(json.dumps(cert))
    assert run_cli("verify-certificate", bad)[0] == 1


def test_a_changed_kernel_is_rejected(certified, run_cli, tmp_path):
    d, out, _ = certified
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(out, moved / "cert.json")
    shutil.copy(d / "kern.py", moved / "kern.py")
    with open(moved / "kern.py", "a") as fh:
        fh.write("\n# edited\n")
    code, text, _ = run_cli("verify-certificate", moved / "cert.json", "--kernel",
                            f"{moved / 'kern.py'}:matmul")
    assert code == 1 and "the kernel changed since" in text


def test_unreachable_kernel_is_not_a_failure(certified, tmp_path):
    _, out, _ = certified
    cert = json.loads(out.read_text())
    cert["kernel"]["spec"] = "/nowhere/kern.py:matmul"
    cert["kernel"]["file"] = "nothere.py"
    seal(cert)  # as if issued so
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cert))
    ver = verify_certificate(str(p))
    assert ver.ok and {c.name: c.ok for c in ver.checks} == {
        "content hash": True, "signature": True, "kernel source": None, "modules": True}


def test_a_violating_kernel_is_not_certified(run_cli, tmp_path):
    out = tmp_path / "c.json"
    code, text, _ = run_cli("certify", f"{COERCING}:matmul", "--op", "matmul", "--dtype",
                            "float32", "--level", "2", "--out", out)
    assert code == 1 and "not certified at level 2" in text
    cert = json.loads(out.read_text())
    assert cert["certified"] is False and cert["level_achieved"] < 2
    assert any(v["contract"] == "C-PRC-01" and v["verdict"] == "violation" for v in cert["verdicts"])
    assert run_cli("verify-certificate", out)[0] == 0  # an honest "not certified" is intact


def test_usage_errors(run_cli, tmp_path):
    assert run_cli("certify", f"{CORRECT}:matmul", "--op", "matmul", "--dtype", "float32",
                   "--level", "7", "--out", tmp_path / "c.json")[0] == 2
    assert run_cli("verify-certificate", tmp_path / "missing.json")[0] == 2
    (tmp_path / "x.json").write_text("not json")
    assert run_cli("verify-certificate", tmp_path / "x.json")[0] == 2
    (tmp_path / "y.json").write_text('{"schema": "something/else"}')
    assert run_cli("verify-certificate", tmp_path / "y.json")[0] == 1


def test_a_kernel_with_nothing_checked_is_not_certified(tmp_path):
    from kcontract.records.certify import certify
    # no cast contract of the level applies to a float64 target: every one is skipped
    cert = certify(f"{CORRECT}:cast", op="cast", dtype="float64", level=1)
    assert cert["verdicts"] and all(v["verdict"] == "skipped" for v in cert["verdicts"])
    assert cert["certified"] is False and cert["level_achieved"] == 0


def test_a_kernel_override_never_falls_back_to_the_certified_file(certified, tmp_path):
    _, out, _ = certified
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(out, moved / "cert.json")
    shutil.copy(out.parent.parent / "kern.py", moved / "kern.py")  # the certified source
    # the override names a file that is not here: the check must not hash kern.py instead
    ver = verify_certificate(str(moved / "cert.json"), kernel=f"{moved / 'elsewhere.py'}:matmul")
    names = [c.name for c in ver.checks]
    assert names[:3] == ["content hash", "signature", "kernel source"]
    assert ver.checks[2].ok is None and "not reachable" in ver.checks[2].message


def test_a_certificate_whose_verdicts_do_not_reach_its_level_is_rejected(certified, tmp_path):
    """Resealed after claiming a level its own verdicts do not reach: the hash matches, the
    consistency check does not."""
    _, out, _ = certified
    cert = json.loads(out.read_text())
    cert["level"] = 3  # the verdicts cover level 2 only
    seal(cert)
    p = tmp_path / "resealed.json"
    p.write_text(json.dumps(cert))
    ver = verify_certificate(str(p))
    assert ver.checks[0].ok is True
    assert any(c.name == "verdicts" and c.ok is False and "no verdict for C-ORD-01" in c.message
               for c in ver.checks) and not ver.ok
    cert = json.loads(out.read_text())  # or a verdict of the level turned into a violation
    cert["verdicts"][0]["verdict"] = "violation"
    seal(cert)
    p.write_text(json.dumps(cert))
    ver = verify_certificate(str(p))
    assert any(c.name == "verdicts" and c.ok is False and "not a pass" in c.message
               for c in ver.checks) and not ver.ok


def test_the_kernel_is_found_beside_a_moved_certificate(certified, tmp_path):
    """Copied to another folder with the kernel's file beside it, the certificate finds its
    kernel there (by the file name it records) and checks its hash."""
    d, out, _ = certified
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.copy(out, moved / "cert.json")
    shutil.copy(d / "kern.py", moved / "kern.py")
    cert = json.loads(out.read_text())
    cert["kernel"]["spec"] = "gone/kern.py:matmul"  # the original path no longer exists
    seal(cert)
    (moved / "cert.json").write_text(json.dumps(cert))
    ver = verify_certificate(str(moved / "cert.json"))
    src = next(c for c in ver.checks if c.name == "kernel source")
    assert src.ok is True and str(moved / "kern.py") in src.message


def test_certificates_are_signed_and_a_reseal_is_rejected(certified, tmp_path):
    """A certificate edited and given a fresh sha256 (what a kernel or anyone without the
    key can do) fails the signature check; one signed by another key fails unless that
    key is trusted."""
    _, out, _ = certified
    cert = json.loads(out.read_text())
    assert cert["signature"]["algorithm"] == "ed25519"
    assert cert["sandbox"] == ("bubblewrap" if SANDBOXED else "none")
    cert["verdicts"][0]["message"] = "edited"
    cert["content_hash"] = content_hash(cert)  # resealed, not re-signed
    p = tmp_path / "resealed.json"
    p.write_text(json.dumps(cert))
    ver = verify_certificate(str(p))
    sig = next(c for c in ver.checks if c.name == "signature")
    assert sig.ok is False and "does not match" in sig.message and not ver.ok
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from kcontract.records.certify import canonical_bytes
    from kcontract.records.signing import Signer
    other = Signer(Ed25519PrivateKey.generate())
    cert["signature"] = other.sign(canonical_bytes(cert))
    p.write_text(json.dumps(cert))
    ver = verify_certificate(str(p))
    sig = next(c for c in ver.checks if c.name == "signature")
    assert sig.ok is False and "not trusted" in sig.message
    ver = verify_certificate(str(p), trust=[other.public_hex])
    assert next(c for c in ver.checks if c.name == "signature").ok is True


def test_a_changed_module_file_is_rejected(tmp_path):
    """The certificate lists the helper module the kernel imports; editing the helper
    (and leaving the kernel's own file alone) is detected."""
    (tmp_path / "helper_mod.py").write_text("import numpy as np\n\ndef mm(a, b):\n"
                                            "    return np.matmul(a, b)\n")
    (tmp_path / "kern.py").write_text("from helper_mod import mm\n\n"
                                      "def matmul(a, b):\n    return mm(a, b)\n")
    cert = certify(f"{tmp_path / 'kern.py'}:matmul", op="matmul", dtype="float32", level=1)
    paths = [m["path"] for m in cert["modules"]]
    assert str(tmp_path / "helper_mod.py") in paths and str(tmp_path / "kern.py") in paths
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cert))
    assert verify_certificate(str(p)).ok
    with open(tmp_path / "helper_mod.py", "a") as fh:
        fh.write("# swapped\n")
    ver = verify_certificate(str(p))
    mods = next(c for c in ver.checks if c.name == "modules")
    assert mods.ok is False and "helper_mod.py" in mods.message and not ver.ok


def test_levels_need_the_sandbox_and_level_3_a_secret_seed(monkeypatch, tmp_path):
    spec = f"{CORRECT}:matmul"
    with pytest.raises(UsageError, match="secret-seeded|needs the sandbox"):
        certify(spec, op="matmul", dtype="float32", level=3, seed=5)
    monkeypatch.setenv("KCONTRACT_SANDBOX", "none")
    for level in (2, 3):
        with pytest.raises(UsageError, match="needs the sandbox"):
            certify(spec, op="matmul", dtype="float32", level=level)
    with pytest.raises(UsageError, match="needs the sandbox"):
        certify(spec, op="matmul", dtype="float32", level=3, allow_unsandboxed=True)
    cert = certify(spec, op="matmul", dtype="float32", level=1)
    assert cert["sandbox"] == "none" and cert["secret_seed"] is True and cert["seed"] > 0
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cert))
    box = next(c for c in verify_certificate(str(p)).checks if c.name == "sandbox")
    assert box.ok is None and "without a sandbox" in box.message


def test_verify_never_imports_the_kernels_package(tmp_path, monkeypatch):
    """A certificate naming ``package.module:fn``: finding the module's file must not run
    the package's ``__init__`` (kernel code) in the verifier."""
    pkg = tmp_path / "evilpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import os\nos.environ['KCONTRACT_VERIFY_PWNED'] = '1'\n")
    (pkg / "kern.py").write_text("def matmul(a, b):\n    return a @ b\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from kcontract.records.certify import kernel_source
    found = kernel_source("evilpkg.kern:matmul")
    assert found == str(pkg / "kern.py")
    import os
    assert "KCONTRACT_VERIFY_PWNED" not in os.environ


def test_a_recovered_recipe_is_signed_into_the_certificate(run_cli, tmp_path):
    """The fp16-operand stack fails C-PRC-01/04: the certificate carries the recipe the
    violation recovered, and a changed byte in it is rejected like any other."""
    out = tmp_path / "c.json"
    code, _, _ = run_cli("certify", f"{COERCING}:matmul", "--op", "matmul", "--dtype",
                         "float32", "--level", "2", "--out", out, "--seed", "5",
                         *([] if SANDBOXED else ["--allow-unsandboxed"]))
    assert code == 1
    cert = json.loads(out.read_text())
    rec = cert["recipe"]
    assert rec["contract"] in ("C-PRC-01", "C-PRC-04")
    assert rec["operand_format"] == "float16" and rec["operand_format_confidence"] == 1.0
    assert abs(rec["accumulator_bits"] - 24) <= 1 and "fp16 operands" in rec["summary"]
    assert run_cli("verify-certificate", out)[0] == 0
    text = out.read_text()
    edited = text.replace('"operand_format": "float16"', '"operand_format": "float32"', 1)
    assert edited != text
    p = tmp_path / "edited.json"
    p.write_text(edited)
    ver = verify_certificate(str(p))
    assert not ver.ok
    assert next(c for c in ver.checks if c.name == "content hash").ok is False


def test_the_certificate_page_lists_the_recovered_recipe():
    from kcontract.report.html import render_certificate_html
    cert = {"kernel": {"spec": "k.py:mm"}, "verdicts": [], "recipe": {
        "contract": "C-PRC-01", "summary": "fp32 operands, 11-bit accumulator (nearest)",
        "accumulator_bits": 11, "accumulator_bits_confidence": 1.0,
        "evidence": {"accumulator_bits": "kept the small term for q <= 10"}}}
    page = render_certificate_html(cert)
    assert "Recovered recipe" in page and "fp32 operands, 11-bit accumulator" in page
    assert "<td>accumulator_bits</td><td>11</td><td>100%</td>" in page
    assert "Recovered recipe" not in render_certificate_html({"kernel": {}, "verdicts": []})
