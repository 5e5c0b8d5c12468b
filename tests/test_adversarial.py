"""The adversarial corpus: every gaming kernel in tests/adversarial/ is caught with
the class or error code its file names; the honest kernels there are not flagged."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from kcontract.check.runner import check

CORPUS = Path(__file__).parent / "adversarial"


def _constants(path: Path) -> dict:
    """The file's module-level constants, read without running it here (a gaming
    kernel may tamper with the process that imports it)."""
    import ast
    tree = ast.parse(path.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            tuples = [t for t in node.targets if isinstance(t, ast.Tuple)]
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            for n in names:
                out[n] = value
            for t in tuples:
                for elt, v in zip(t.elts, value):
                    out[elt.id] = v
    return out


FILES = sorted(p for p in CORPUS.glob("*.py"))
GAMING = [p for p in FILES if not p.name.startswith("honest_")]
HONEST = [p for p in FILES if p.name.startswith("honest_")]


def test_the_corpus_is_complete():
    assert len(GAMING) >= 15 and len(HONEST) >= 3
    for p in FILES:
        c = _constants(p)
        assert {"OP", "DTYPE", "FRAMEWORK", "CLASSES", "EXPECTED"} <= set(c), p.name
        assert (c["EXPECTED"] is None) == p.name.startswith("honest_"), p.name


def _check(path: Path):
    c = _constants(path)
    run = check(f"{path}:kernel", op=c["OP"], dtype=c["DTYPE"], framework=c["FRAMEWORK"],
                classes=c["CLASSES"], timeout=30)
    return c, run


@pytest.mark.parametrize("path", GAMING, ids=[p.stem for p in GAMING])
def test_gaming_kernel_is_caught(path):
    c, run = _check(path)
    expected = c["EXPECTED"]
    assert run.verdict != "conformant", f"{path.name} passed every contract it was checked on"
    found = [(r.contract, r.verdict.value, (r.signature or {}).get("code")) for r in run.results]
    if expected.startswith("C-"):
        hits = [r for r in run.results if r.contract == expected and r.verdict.value == "violation"]
        assert hits, f"{path.name}: expected a {expected} violation, got {found}"
    else:
        hits = [r for r in run.results if r.verdict.value == "error"
                and (r.signature or {}).get("code") == expected]
        assert hits, f"{path.name}: expected error {expected}, got {found}"


@pytest.mark.parametrize("path", HONEST, ids=[p.stem for p in HONEST])
def test_honest_kernel_is_not_flagged(path):
    c, run = _check(path)
    bad = [(r.id, r.verdict.value, r.message) for r in run.results
           if r.verdict.value not in ("pass", "skipped")]
    assert not bad, f"{path.name} was flagged: {bad}"
    assert any(r.verdict.value == "pass" for r in run.results)


def test_checker_process_is_untouched_by_the_corpus():
    """After the tampering kernels ran (in their workers), this process still has
    IEEE subnormals, the real numpy comparisons, its error state, and no code that a
    forged reply tried to run here."""
    import os

    import numpy as np
    from kcontract.adapters.base import flush_to_zero_active
    for name in ("flush_to_zero", "patch_code_object", "numpy_errstate", "channel_pickle"):
        _check(CORPUS / f"{name}.py")
    assert "KCONTRACT_ADVERSARIAL_PWNED" not in os.environ
    assert not flush_to_zero_active()
    assert not np.allclose(0.0, 1.0)
    assert not np.isclose(0.0, 1.0)
    assert np.geterr()["over"] != "raise"


def test_worker_hardening_primitives():
    from kcontract.check.worker import overlapping
    assert overlapping((4, 4), (0, 0), 4)            # broadcast
    assert overlapping((4, 4), (4, 4), 4)            # as_strided rows overlapping
    assert not overlapping((4, 4), (16, 4), 4)       # C order, bytes
    assert not overlapping((4, 3), (1, 4), 1)        # a transpose, elements
    assert not overlapping((1, 5), (0, 1), 1)        # size-1 dims do not count
    spec = importlib.util.find_spec("kcontract.check.worker")
    assert spec is not None
