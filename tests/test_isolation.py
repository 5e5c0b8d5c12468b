"""A kernel that segfaults, hangs, exits, flips FP state or monkeypatches numpy
gets a verdict; the checker itself stays correct."""
import numpy as np
import pytest

from kcontract.check.runner import check
from kcontract.language.loader import load_contract_text

from conftest import kernel

CONTRACT = """
id: iso-matmul
class: C-PRC-01
title: isolation test contract
scope: {op: matmul, dtypes: [float32]}
tolerance:
  tol: gamma(K, u(accumulate)) * mag + u(dtype) * abs(ref)
postcondition: abs(out - ref) <= tol
oracle: fp64
protocol: {kind: compare, families: [normal], shapes: [{M: 8, K: 16, N: 4}]}
signature: {code: inaccurate, summary: result less accurate than declared}
"""


@pytest.fixture(scope="module")
def contract():
    return load_contract_text(CONTRACT, "iso.yaml")[0]


def run(contract, fn, **kw):
    return check(kernel("misbehaving.py", fn), op="matmul", dtype="float32",
                 contracts=[contract], timeout=kw.pop("timeout", 20), **kw)


@pytest.mark.parametrize("fn,verdict,code", [
    ("segfault", "error", "kernel.crashed"),
    ("exits", "error", "kernel.crashed"),
    ("raises", "error", "kernel.raised"),
    ("flush_to_zero", "error", "integrity.state"),
    ("patches_numpy", "error", "integrity.patched"),
    ("wrong_shape", "error", "kernel.wrong-shape"),
    ("wrong_dtype", "error", "kernel.wrong-dtype"),
    ("returns_none", "error", "kernel.bad-output"),
    ("mutates_input", "error", "integrity.mutated-input"),
    ("aliases_input", "error", "integrity.aliased-output"),
    ("plainly_wrong", "violation", "C-PRC-01.inaccurate"),
    ("honest", "pass", None),
])
def test_misbehaving_kernels_get_a_verdict(contract, fn, verdict, code):
    result = run(contract, fn).results[0]
    assert result.verdict.value == verdict, result.message
    if code:
        assert result.signature["code"] == code


def test_hang_is_a_timeout_verdict(contract):
    result = run(contract, "hang", timeout=1.5).results[0]
    assert result.verdict.value == "error"
    assert result.signature["code"] == "kernel.timeout"


def test_checker_stays_correct_after_tampering(contract):
    """After a kernel flushed subnormals and patched numpy in its worker, this
    process still has IEEE subnormals and the real numpy, and an honest kernel
    checked next still passes while a wrong one is still caught."""
    from kcontract.adapters.base import flush_to_zero_active
    for fn in ("flush_to_zero", "patches_numpy", "segfault"):
        run(contract, fn)
    assert not flush_to_zero_active()
    assert not np.allclose(0.0, 1.0)
    assert np.abs(np.array([-2.0]))[0] == 2.0
    assert run(contract, "honest").results[0].verdict.value == "pass"
    assert run(contract, "plainly_wrong").results[0].verdict.value == "violation"


def test_in_process_mode_runs_the_kernel_here(contract):
    result = run(contract, "honest", in_process=True).results[0]
    assert result.verdict.value == "pass"


def test_unloadable_kernel_is_an_error_verdict(contract, tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("raise ImportError('no such library')\n")
    res = check(f"{bad}:fn", op="matmul", dtype="float32", contracts=[contract]).results[0]
    assert res.verdict.value == "error" and "ImportError: no such library" in res.message
    assert res.signature["code"] == "kernel.load"


@pytest.mark.parametrize("in_process", [False, True], ids=["isolated", "in-process"])
@pytest.mark.parametrize("spec,says", [
    ("no_such_file.py:f", "no such kernel file"),
    ("KERNELS/misbehaving.py:no_such_function", "has no attribute 'no_such_function'"),
    ("KERNELS/misbehaving.py", "kernel must be"),
])
def test_a_spec_that_names_no_kernel_is_a_usage_error(contract, spec, says, in_process):
    from conftest import KERNELS
    from kcontract.errors import UsageError
    with pytest.raises(UsageError, match=says):
        check(spec.replace("KERNELS", str(KERNELS)), op="matmul", dtype="float32",
              contracts=[contract], in_process=in_process)


def test_cli_exit_code_for_a_missing_kernel(run_cli, tmp_path):
    code, out, err = run_cli("check", tmp_path / "absent.py:f", "--op", "matmul", "--dtype",
                             "float32", "--no-store")
    assert code == 2
    assert "no such kernel file" in err


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_relayout_keeps_the_values_and_breaks_contiguity(framework, layout):
    from kcontract.adapters import get_adapter
    ad = get_adapter(framework)
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    idx = np.array([4, 0, 2], dtype=np.int64)
    for arr in (x, idx):
        view = ad.relayout(ad.to_native(arr, "cpu"), layout)
        back, meta = ad.to_numpy(view)
        np.testing.assert_array_equal(back, arr)
        assert back.dtype == arr.dtype
        if layout == "strided" or arr.ndim >= 2:
            assert not meta["contiguous"], (layout, arr.shape, meta)
    if layout == "strided":  # the gaps hold poison, not a copy of the data
        view = ad.relayout(ad.to_native(x, "cpu"), layout)
        base = view.base if framework == "numpy" else view._base
        assert np.isnan(np.asarray(base)).sum() == x.size


def test_a_decoy_on_the_real_inputs_is_no_evidence_of_a_stale_output(tmp_path):
    """Shuffling a one-element input (or one whose elements are all alike) gives the real
    call's inputs back: that decoy's output is not remembered, so a kernel's right (or merely
    imprecise) answer at M=K=N=1 is never taken for another call's output."""
    from kcontract.check.sandbox import KernelProcess, _differs, output_digest
    path = tmp_path / "k.py"
    path.write_text("import numpy as np\ndef mm(a, b):\n    return np.matmul(a, b)\n")
    one = [np.array([[1.5]], np.float32), np.array([[2.0]], np.float32)]
    assert not _differs(list(one), one)
    assert not _differs([np.full(4, 3.0)], [np.full(4, 3.0)])
    assert _differs([np.array([2.0, 1.0])], [np.array([1.0, 2.0])])
    with KernelProcess(f"{path}:mm") as k:
        res = k.call(one)
        assert res.ok and output_digest(np.asarray(res.out)) not in k.decoy_digests
        two = [np.array([[1.0, 2.0]], np.float32), np.array([[3.0], [5.0]], np.float32)]
        assert k.call(two).ok
