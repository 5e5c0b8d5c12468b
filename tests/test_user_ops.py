"""User-defined ops: define_op in one file, and every generic class runs on it and gives a
verdict, from --op, from a contract file, from the pytest fixture, and from an entry point."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kcontract
from kcontract.check.runner import check, select_contracts
from kcontract.errors import UsageError
from kcontract.ops import get_op
from kcontract.ops.base import Lacks

ROOT = Path(__file__).parents[1]
EXAMPLE = ROOT / "examples" / "user_op"
GENERIC = {"C-PRC-01", "C-ORD-02", "C-ORD-03", "C-CMP-03", "C-EXC-01"}
ALL_CLAIMS = {"deterministic": "true", "batch_invariant": "true"}

OPS_FILE = '''\
import numpy as np
import kcontract


def _ref(x, scale):
    return np.cumsum(x, axis=-1)[..., -1:] * scale + 0 * x   # (R, N): row sum, broadcast


rowsum_scaled = kcontract.define_op(
    name="rowsum_scaled", inputs={"x": ("R", "N"), "scale": ("N",)}, output=("R", "N"),
    oracle=lambda x, scale: np.sum(x, axis=-1, keepdims=True) * scale,
    reduction=("N",), batch="R",
    magnitude=lambda x, scale: np.sum(np.abs(x), axis=-1, keepdims=True) * np.abs(scale))
'''

KERNELS_FILE = '''\
import numpy as np


def good(x, scale):
    s = np.sum(x.astype(np.float32), axis=-1, keepdims=True, dtype=np.float32)
    return (s * scale.astype(np.float32)).astype(x.dtype)


def narrow(x, scale):
    s = np.sum(x.astype(np.float16), axis=-1, keepdims=True, dtype=np.float16)
    return (s.astype(np.float32) * scale).astype(x.dtype)
'''


@pytest.fixture
def user_files(tmp_path):
    (tmp_path / "myops.py").write_text(OPS_FILE)
    (tmp_path / "mykernels.py").write_text(KERNELS_FILE)
    return tmp_path


def _verdicts(run):
    return {r.contract: r.verdict.value for r in run.results}


def test_define_op_validates_its_arguments():
    with pytest.raises(UsageError, match="reduction symbol 'K'"):
        kcontract.define_op("f", {"x": ("R", "N")}, ("R",), np.sum, reduction=("K",))
    with pytest.raises(UsageError, match="appear in no input"):
        kcontract.define_op("f", {"x": ("R", "N")}, ("R", "M"), np.sum)
    with pytest.raises(UsageError, match="tuple of symbol names"):
        kcontract.define_op("f", {"x": "RN"}, ("R",), np.sum)
    with pytest.raises(UsageError, match="built-in op name"):
        get_op(kcontract.define_op("matmul", {"x": ("R",)}, ("R",), lambda x: x))


def test_every_generic_class_runs_on_an_op_defined_in_one_file(user_files):
    spec = f"{user_files / 'myops.py'}:rowsum_scaled"
    run = check(f"{user_files / 'mykernels.py'}:good", op=spec, dtype="float32",
                declare=ALL_CLAIMS)
    assert set(_verdicts(run)) == GENERIC
    assert set(_verdicts(run).values()) == {"pass"}, [(r.id, r.message) for r in run.results]
    for r in run.results:
        assert r.tolerance or r.contract in ("C-ORD-02", "C-ORD-03")
    # the generic C-PRC-01 discriminates: fp16 accumulation is caught
    bad = check(f"{user_files / 'mykernels.py'}:narrow", op=spec, dtype="float32",
                classes=["C-PRC-01"])
    (res,) = bad.results
    assert res.verdict.value == "violation"
    assert "pgamma(n, u(accumulate)) * cond * mag" in res.tolerance


def test_a_missing_capability_is_an_explicit_skip(user_files):
    """C-ORD-01's reorder needs the reorder capability; the op does not declare it."""
    op = get_op(f"{user_files / 'myops.py'}:rowsum_scaled")
    assert isinstance(op.reorder({}), Lacks)
    from kcontract.language import load_contract_text
    (c,) = load_contract_text(textwrap.dedent("""\
        id: my/ord01
        class: C-ORD-01
        scope: {op: any, dtypes: [float32]}
        tolerance: {tol: ulp(ref)}
        postcondition: abs(out - ref) <= tol
        oracle: fp64
        protocol: {kind: reorder}
        signature: {code: x, summary: x}
        """))
    run = check(f"{user_files / 'mykernels.py'}:good", op=op, dtype="float32", contracts=[c],
                in_process=True)
    (res,) = run.results
    assert res.verdict.value == "skipped"
    assert res.message == ("op 'rowsum_scaled' does not declare the capability 'reorder': no "
                           "input axes carrying the reduction index declared (reorder_axes)")


def test_the_op_from_a_contract_file(user_files, run_cli):
    (user_files / "c.yaml").write_text(textwrap.dedent("""\
        kernel: mykernels.py:narrow
        dtype: float32
        id: my/rowsum-prc01
        class: C-PRC-01
        scope: {op: myops.py:rowsum_scaled, dtypes: [float32]}
        tolerance:
          tol: pgamma(n, u(accumulate)) * mag + ulp(ref)
        postcondition: abs(out - ref) <= tol
        oracle: fp64
        protocol:
          kind: compare
          families: [positive]
          shapes: [{R: 4, N: 2048}]
        signature: {code: narrow, summary: narrower accumulation than declared}
        """))
    code, out, _ = run_cli("check", user_files / "c.yaml", "--no-store", "--json",
                           user_files / "run.json")
    assert code == 1, out
    data = json.loads((user_files / "run.json").read_text())
    assert data["op"] == "rowsum_scaled"
    assert [r["verdict"] for r in data["results"]] == ["violation"]


def test_a_bad_op_spec_in_a_contract_file_points_at_it(tmp_path, run_cli):
    (tmp_path / "c.yaml").write_text(textwrap.dedent("""\
        id: my/x
        class: C-PRC-01
        scope: {op: nothere.py:f, dtypes: [float32]}
        tolerance: {tol: ulp(ref)}
        postcondition: abs(out - ref) <= tol
        oracle: fp64
        protocol: {kind: compare}
        signature: {code: x, summary: x}
        """))
    code, _, err = run_cli("check", tmp_path / "c.yaml", "--no-store")
    assert code == 2 and "c.yaml:3:" in err and "not found" in err


def test_the_op_from_the_cli_by_module(user_files, run_cli, monkeypatch):
    monkeypatch.syspath_prepend(str(user_files))
    code, out, _ = run_cli("check", f"{user_files / 'mykernels.py'}:good", "--op",
                           "myops:rowsum_scaled", "--dtype", "float32", "--contract", "C-CMP-03",
                           "--no-store")
    assert code == 0, out
    assert "cmp03-any" in out and "pass" in out


def test_the_op_from_an_entry_point(user_files, monkeypatch):
    from importlib.metadata import EntryPoint
    from kcontract.ops import registry
    monkeypatch.syspath_prepend(str(user_files))
    monkeypatch.setattr(registry, "_entry_points", lambda: [
        EntryPoint("rowsum_scaled", "myops:rowsum_scaled", registry.ENTRY_POINT_GROUP)])
    monkeypatch.setattr(registry, "USER", {})
    assert "rowsum_scaled" in registry.known_names()
    op = get_op("rowsum_scaled")
    assert op.name == "rowsum_scaled" and op.reduction == ("N",)
    assert {c.cls for c in select_contracts("rowsum_scaled", "float32", "numpy")} == GENERIC


def test_the_op_from_the_pytest_fixture(user_files, kcontract_check, monkeypatch):
    monkeypatch.syspath_prepend(str(user_files))
    import myops
    import mykernels
    run = kcontract_check(mykernels.good, op=myops.rowsum_scaled, dtype="float32",
                          declare=ALL_CLAIMS)
    assert set(_verdicts(run)) == GENERIC and run.verdict == "conformant"


def test_the_worked_example_end_to_end(run_cli, tmp_path):
    """examples/user_op: the good kernel conforms to every generic class and to its own
    contract file; the bfloat16-statistics kernel violates C-PRC-01."""
    code, out, _ = run_cli("check", f"{EXAMPLE / 'kernels.py'}:add_rmsnorm", "--op",
                           f"{EXAMPLE / 'fused_ops.py'}:add_rmsnorm", "--dtype", "float32",
                           "--declare", "deterministic=true", "--declare", "batch_invariant=true",
                           "--no-store", "--json", tmp_path / "good.json")
    assert code == 0, out
    got = {r["contract"]: r["verdict"] for r in json.loads((tmp_path / "good.json").read_text())["results"]}
    assert got == {c: "pass" for c in GENERIC}
    code, out, _ = run_cli("check", f"{EXAMPLE / 'kernels.py'}:add_rmsnorm_bf16_stats", "--op",
                           f"{EXAMPLE / 'fused_ops.py'}:add_rmsnorm", "--dtype", "float32",
                           "--contract", "C-PRC-01", "--no-store")
    assert code == 1 and "violation" in out
    code, out, _ = run_cli("check", EXAMPLE / "add_rmsnorm.contract.yaml", "--no-store",
                           "--json", tmp_path / "own.json")
    assert code == 0, out
    own = json.loads((tmp_path / "own.json").read_text())["results"]
    assert [(r["id"], r["verdict"]) for r in own] == [("acme/add-rmsnorm-fp32acc", "pass")]


def test_the_bad_example_kernel_passes_the_basic_test():
    """The example's bad kernel is a real trap: it passes allclose(1e-2) on uniform inputs."""
    from kcontract.check.calibrate import basic_functional_test
    from kcontract.check.sandbox import InProcessKernel
    get_op(f"{EXAMPLE / 'fused_ops.py'}:add_rmsnorm")
    for fn, want in (("add_rmsnorm_bf16_stats", True), ("add_rmsnorm", True)):
        h = InProcessKernel(f"{EXAMPLE / 'kernels.py'}:{fn}", framework="numpy")
        h.start()
        try:
            assert basic_functional_test(h, "add_rmsnorm", "float32")[0] is want
        finally:
            h.close()


def test_language_imports_without_the_checker():
    code = ("import sys, kcontract.language as L; "
            "bad = sorted(m for m in sys.modules if m.startswith(('kcontract.check', "
            "'kcontract.classes', 'kcontract.adapters'))); print(bad); assert not bad")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_generic_contract_file_needs_the_op(user_files, run_cli):
    (user_files / "g.yaml").write_text(textwrap.dedent("""\
        kernel: mykernels.py:good
        dtype: float32
        id: my/any-prc01
        class: C-PRC-01
        scope: {op: any, dtypes: [float32]}
        tolerance:
          tol: pgamma(n, u(accumulate)) * cond * mag + ulp(ref)
        postcondition: abs(out - ref) <= tol
        oracle: fp64
        protocol: {kind: compare}
        signature: {code: x, summary: x}
        """))
    code, _, err = run_cli("check", user_files / "g.yaml", "--no-store")
    assert code == 2 and "name the op with --op" in err
    code, out, _ = run_cli("check", user_files / "g.yaml", "--op",
                           f"{user_files / 'myops.py'}:rowsum_scaled", "--no-store")
    assert code == 0 and "pass" in out
