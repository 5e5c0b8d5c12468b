"""The pytest plugin, tested with pytest's own pytester: loaded through the
``pytest11`` entry point (subprocess runs, as a user's pytest loads it), light at
load, a fixture and a marker, in-process fallback for lambdas, options, reports,
and a fresh install of the package."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]

KERNELS = '''
import numpy as np


def matmul(a, b):
    return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)


def fp16_matmul(a, b):
    return (a.astype(np.float16) @ b.astype(np.float16)).astype(a.dtype)


def softmax_in_input_format(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))  # float16 in: every op rounds to float16
    return e / e.sum(axis=-1, keepdims=True)
'''


def _run(pytester, *args):
    # a subprocess: the plugin must come from the installed entry point, not this session
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_plugin_is_registered_and_imports_nothing_heavy():
    from importlib.metadata import entry_points
    eps = [ep for ep in entry_points(group="pytest11") if ep.name == "kcontract"]
    assert eps and eps[0].value == "kcontract.integrations.pytest_plugin"
    code = ("import sys, kcontract.integrations.pytest_plugin; "
            "print(sorted(m for m in ('numpy', 'torch', 'rich', 'click', 'lark', 'yaml', "
            "'kcontract.check', 'kcontract.suite') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_fixture_passes_a_conforming_kernel_and_fails_a_violating_one(pytester):
    pytester.makepyfile(kernels=KERNELS)
    pytester.makepyfile(test_kernels='''
        from kernels import matmul, fp16_matmul


        def test_good(kcontract_check):
            run = kcontract_check(matmul, op="matmul", dtype="float32",
                                  declare={"accumulate": "float32"}, classes=["C-PRC-01"])
            assert run.verdict == "conformant"
            assert [r.contract for r in run.results] == ["C-PRC-01"]


        def test_bad(kcontract_check):
            kcontract_check(fp16_matmul, op="matmul", dtype="float32", classes=["C-PRC-01"])
    ''')
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*kcontract: kernels.py:fp16_matmul breaks 1 contract (op=matmul dtype=float32*",
        "*C-PRC-01 prc01-matmul:*",
        "*worst element*actual*expected*allowed*",
        "*reproduce: kcontract check kernels.py:fp16_matmul --op matmul --dtype float32*",
        "*2 kernel checks: 1 conformant, 1 violation*",
    ])


def test_a_failure_names_the_cause_and_the_claim_that_describes_the_kernel(pytester):
    pytester.makepyfile(kernels=KERNELS)
    pytester.makepyfile(test_sixteen='''
        from kernels import softmax_in_input_format


        def test_softmax16(kcontract_check):
            kcontract_check(softmax_in_input_format, op="softmax", dtype="float16")
    ''')
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*C-PRC-01, shown by C-PRC-02 prc02-softmax: computes in float16*",
        "*hint: conforms if declared accumulate=float16*",
    ])


def test_a_check_that_checks_nothing_fails(pytester):
    pytester.makepyfile(kernels=KERNELS)
    pytester.makepyfile(test_nothing='''
        from kernels import matmul


        def test_only_skipped(kcontract_check):
            kcontract_check(matmul, op="matmul", dtype="float32", classes=["C-ORD-03"])


        def test_inspecting_is_allowed(kcontract_check):
            run = kcontract_check(matmul, op="matmul", dtype="float32", classes=["C-ORD-03"],
                                  fail=False)
            assert [r.verdict.value for r in run.results] == ["skipped"]
    ''')
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*nothing was checked*batch_invariant=True*"])


def test_marker_gives_defaults_and_a_lambda_runs_in_process(pytester):
    pytester.makepyfile(test_marked='''
        import numpy as np
        import pytest

        pytestmark = pytest.mark.kcontract(op="matmul", dtype="float32", classes=["C-PRC-01"])


        def matmul(a, b):
            return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)


        def test_module_marker(kcontract_check):
            run = kcontract_check(matmul)
            assert run.op == "matmul" and run.verdict == "conformant"


        @pytest.mark.kcontract(dtype="bfloat16")
        def test_closest_marker_wins(kcontract_check):
            assert kcontract_check(matmul).dtype == "bfloat16"


        def test_lambda(kcontract_check):
            run = kcontract_check(lambda a, b: matmul(a, b))
            assert run.verdict == "conformant"
    ''')
    result = _run(pytester, "-W", "default")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*KcontractWarning*lambda*checked in this process, without "
                                 "isolation*"])


def test_class_option_and_json_report_across_xdist_workers(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(kernels=KERNELS)
    pytester.makepyfile(test_opts='''
        from kernels import matmul


        def test_one(kcontract_check):
            run = kcontract_check(matmul, op="matmul", dtype="float32")
            assert sorted({r.contract for r in run.results}) == ["C-ORD-02", "C-PRC-04"]


        def test_two(kcontract_check):
            kcontract_check(matmul, op="matmul", dtype="bfloat16")
    ''')
    result = _run(pytester, "-n", "2", "--kcontract-classes", "C-PRC-04,C-ORD-02",
                  "--kcontract-report", "out/runs.json", "--kcontract-seed", "random")
    result.assert_outcomes(passed=2)
    data = json.loads((pytester.path / "out" / "runs.json").read_text())
    assert data["schema"] == "kcontract.pytest/1"
    tests = [(r["test"].split("::")[-1], r["dtype"], r["verdict"]) for r in data["runs"]]
    assert tests == [("test_one", "float32", "conformant"), ("test_two", "bfloat16", "conformant")]
    result.stdout.fnmatch_lines(["*2 kernel checks: 2 conformant*", "*report: out/runs.json*"])


def test_usage_error_without_op(pytester):
    pytester.makepyfile(test_usage='''
        def test_it(kcontract_check):
            kcontract_check(lambda a, b: a @ b)
    ''')
    result = _run(pytester)
    result.assert_outcomes(errors=0, failed=1)
    result.stdout.fnmatch_lines(["*kcontract_check needs op= and dtype=*"])


def test_resolution_of_kernels():
    from kcontract.integrations import pytest_plugin as pp
    from kcontract.check import worker
    t = pp.resolve(worker.resolve_kernel)
    assert t.spec == "kcontract.check.worker:resolve_kernel" and t.fn is None
    assert Path(t.paths[0], "kcontract", "check", "worker.py").exists()
    assert pp.resolve("k.py:f").spec == "k.py:f"
    t = pp.resolve(lambda a: a)
    assert t.fn is not None and "without isolation" in t.note

    class K:
        def __call__(self, a):
            return a
    assert pp.resolve(K()).fn is not None
    assert pp._guess_framework(pp._guess_framework) == "numpy"


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_fresh_install_runs_the_plugin(pytester, tmp_path):
    """Build the wheel, install it (no dependencies) into a new virtual environment whose
    dependencies come from this one, and run a test file there: the entry point, the
    package data (the suite) and the isolated worker all work from the install."""
    src = tmp_path / "src-copy"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "src" / "kcontract", src / "src" / "kcontract",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = subprocess.run(pip + ["wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                                  str(wheels), str(src)], capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {built.stderr[-300:]}")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    inst = subprocess.run(pip + ["--python", str(py), "install", "-q", "--no-deps",
                                 *map(str, wheels.glob("*.whl"))], capture_output=True, text=True)
    if inst.returncode != 0:
        pytest.skip(f"pip cannot install into another environment: {inst.stderr[-300:]}")
    # the dependencies (numpy, pytest, ...) from this environment, after the venv's own
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, check=True)
    import sysconfig
    deps = [p for p in sys.path if p.endswith("site-packages")] or [sysconfig.get_paths()["purelib"]]
    Path(purelib.stdout.strip(), "zz_dependencies.pth").write_text("\n".join(deps) + "\n")
    pytester.makepyfile(kernels=KERNELS)
    pytester.makepyfile(test_fresh='''
        import kcontract
        from kernels import matmul


        def test_installed(kcontract_check):
            assert "site-packages" in kcontract.__file__
            kcontract_check(matmul, op="matmul", dtype="float32", classes=["C-PRC-01"])
    ''')
    result = pytester.run(str(py), "-m", "pytest", "-p", "no:cacheprovider", "-q",
                          str(pytester.path / "test_fresh.py"))
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*1 kernel check: 1 conformant*", "*1 passed*"])
