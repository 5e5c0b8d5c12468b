"""The registry checks itself: every contract of the suite is documented,
explainable, calibrated, and covers the required (class, op) matrix."""
import importlib
from pathlib import Path

import numpy as np
import pytest

from kcontract.check.calibrate import kernel_module_name
from kcontract.classes import CLASSES
from kcontract.suite import load_suite

ROOT = Path(__file__).parents[1]
REQUIRED = {
    "C-PRC-01": {"matmul", "sum", "attention", "layernorm", "linear_gelu"},
    "C-PRC-02": {"softmax", "layernorm", "attention"},
    "C-PRC-03": {"matmul", "sum", "gelu", "cast"},
    "C-PRC-04": {"matmul", "attention", "cast"},
    "C-ORD-01": {"sum", "matmul"},
    "C-ORD-02": {"matmul", "sum", "softmax", "layernorm", "attention", "embedding", "gelu",
                 "linear_gelu", "cast"},
    "C-ORD-03": {"matmul", "sum", "softmax", "layernorm", "attention"},
    "C-CMP-01": {"linear_gelu", "gelu", "attention"},
    "C-CMP-02": {"matmul", "sum"},
    "C-CMP-03": {"matmul", "sum", "softmax", "layernorm", "attention", "embedding", "gelu",
                 "linear_gelu", "cast"},
    "C-EXC-01": {"matmul", "sum", "softmax", "layernorm", "gelu", "cast"},
    "C-EXC-02": {"embedding"},
}
SUITE = load_suite()


def test_twelve_classes_in_four_families():
    assert len(CLASSES) == 12
    assert {c.family_id for c in CLASSES.values()} == {"C-PRC", "C-ORD", "C-CMP", "C-EXC"}


def test_coverage_matrix():
    have = {}
    for c in SUITE:
        have.setdefault(c.cls, set()).add(c.op)
    for cls, ops in REQUIRED.items():
        assert ops <= have.get(cls, set()), (cls, ops - have.get(cls, set()))


@pytest.mark.parametrize("contract", SUITE, ids=lambda c: c.id)
def test_documented_explainable_calibrated(contract, run_cli):
    readme = (ROOT / "README.md").read_text()
    assert f"`{contract.id}`" in readme, "missing from the README's calibration matrix"
    assert contract.description.strip(), "no description (tolerance derivation)"
    mod = importlib.import_module(kernel_module_name(contract.id))
    for role in ("baseline", "bad", "good"):
        assert callable(getattr(mod, role))
    code, out, _ = run_cli("explain", contract.id)
    assert code == 0 and contract.postcondition.source.split()[0] in out


def test_calibration_runs_the_checkers_blas_on_one_thread_and_gives_it_back():
    """The checker's own OpenBLAS is on one thread during a calibration (its float64
    oracles are small; spinning BLAS threads took the CPU from the kernels' workers) and
    has its threads back after; a kernel's worker, another process, keeps its own."""
    from threadpoolctl import threadpool_info
    from kcontract.check import calibrate as cal
    np.ones(2) @ np.ones(2)  # numpy's BLAS loaded

    def get_threads():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    before = get_threads()
    if not before:
        pytest.skip("no BLAS with a thread setting found in this process")
    seen = []
    cal.calibrate(classes=["C-ORD-01"], ops=["sum"], progress=lambda c: seen.append(get_threads()))
    assert seen == [[1] * len(before)] and get_threads() == before
