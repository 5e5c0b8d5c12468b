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


# -- limits, floating-point state, the module list, judging (the checker's own view) ------

import os  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

ADV = Path(__file__).parent / "adversarial"


def test_limit_settings_parse_and_bad_ones_are_usage_errors(monkeypatch):
    from kcontract.check import limits
    from kcontract.errors import UsageError
    assert limits.parse_size("512M") == 512 << 20 and limits.parse_size("2GiB") == 2 << 30
    assert limits.parse_size("none") is None and limits.parse_size("4096") == 4096
    monkeypatch.setenv(limits.ENV_MEMORY, "1.5G")
    monkeypatch.setenv(limits.ENV_PROCESSES, "32")
    assert limits.configured() == {"memory": int(1.5 * (1 << 30)), "processes": 32}
    monkeypatch.delenv(limits.ENV_MEMORY)
    mem = limits.machine_memory()
    assert 0 < limits.configured()["memory"] <= mem  # a share of this machine's memory
    for var, bad in ((limits.ENV_MEMORY, "lots"), (limits.ENV_PROCESSES, "-3")):
        monkeypatch.setenv(var, bad)
        with pytest.raises(UsageError):
            limits.configured()
        monkeypatch.delenv(var)


def test_a_run_records_its_limits_and_cgroups_are_removed():
    """Every worker gets its own cgroup where one can be made; the run says what enforced
    each limit, and no cgroup of this checker is left once the check is over."""
    from kcontract.check import limits
    from kcontract.check.jail import detect
    if not detect().isolated:
        pytest.skip("no sandbox here")
    def ours():  # this process's cgroups (other tests in it may still hold a worker)
        found = set()
        for hier, path in limits.own_cgroups().items():
            root = limits._mounts().get(hier if hier else "v2")
            folder = os.path.join(root or "/nonexistent", path.lstrip("/"))
            if os.path.isdir(folder):
                found |= {(hier, d) for d in os.listdir(folder)
                          if d.startswith(f"{limits.PREFIX}{os.getpid()}-")}
        return found
    before = ours()
    run = check(f"{ADV / 'honest_blocked.py'}:kernel", op="matmul", dtype="float32",
                classes=["C-PRC-01"])
    assert run.verdict == "conformant"
    can = limits.enforceable()
    for name in ("memory", "processes"):
        entry = run.limits[name]
        assert entry["limit"] and (entry["enforced"].startswith("cgroup") == (name in can))
    assert run.limits["cpu_seconds"]["enforced"] == "rlimit"
    assert run.to_json()["limits"] == run.limits
    left = ours() - before
    assert not left, left


def test_without_a_writable_cgroup_the_run_says_so_and_still_checks(monkeypatch, capsys):
    """No cgroup hierarchy (mounted read-only, or none at all): the worker still runs, the
    run records the limits as not enforced by a cgroup, and the checker says so."""
    from kcontract.check import limits
    from kcontract.check.jail import detect
    if not detect().isolated:
        pytest.skip("no sandbox here")
    monkeypatch.setattr(limits, "_mounts", lambda: {})
    monkeypatch.setattr(limits, "_WARNED", set())
    run = check(f"{ADV / 'honest_blocked.py'}:kernel", op="matmul", dtype="float32",
                classes=["C-PRC-01"])
    assert run.verdict == "conformant"
    assert run.limits["memory"]["enforced"] == "rlimit (address space)"
    assert run.limits["processes"]["enforced"] in ("no", "rlimit (per user)")
    assert "why" in run.limits["processes"] or os.geteuid() != 0
    assert "no cgroup enforces" in capsys.readouterr().err


def test_ftz_with_its_reporting_rebound_needs_the_parents_read(monkeypatch):
    """The attack that rebinds the worker's flush-to-zero detector and strips every flag:
    caught by the checker's own read of the worker's registers (integrity.state) and, with
    that read made impossible, not by anything the worker says (fp_state records it)."""
    from kcontract.check import fpstate
    if not fpstate.supported():
        pytest.skip("no parent-side read of the FP control registers on this platform")
    spec = f"{ADV / 'f2_ftz_rebinds_reporting.py'}:kernel"
    run = check(spec, op="matmul", dtype="float32", classes=["C-PRC-01"])
    if run.fp_state != "checker (ptrace)":
        pytest.skip(f"the checker could not read the worker's registers ({run.fp_state})")
    codes = [(r.signature or {}).get("code") for r in run.results]
    assert codes == ["integrity.state"], codes
    assert "flush-to-zero" in run.results[0].message
    monkeypatch.setattr(fpstate, "read_threads", lambda pid, only=None: None)
    blind = check(spec, op="matmul", dtype="float32", classes=["C-PRC-01"])
    assert blind.fp_state == "worker-reported"
    assert [(r.signature or {}).get("code") for r in blind.results] != ["integrity.state"]


def test_fp_state_read_from_a_child_process():
    """The parent-side reader on a plain child: default registers read as unchanged, a
    thread with flush-to-zero on is named."""
    import subprocess
    import sys
    from kcontract.check import fpstate
    if not fpstate.supported():
        pytest.skip("no FP register layout for this machine")
    code = (f"import sys; sys.path.insert(0, {str(ADV)!r}); import f2_ftz_rebinds_reporting as f; "
            "f.flush_to_zero() if sys.argv[1] == '1' else None; print('ready', flush=True); "
            "sys.stdin.read()")
    for ftz in ("0", "1"):
        p = subprocess.Popen([sys.executable, "-c", code, ftz], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
        try:
            assert p.stdout.readline().strip() == b"ready"
            threads = fpstate.read_threads(p.pid)
            if threads is None:
                pytest.skip("no ptrace rights over a child here")
            changes = fpstate.changed(threads)
            assert bool(changes) == (ftz == "1"), changes
            if ftz == "1":
                assert "flush-to-zero" in changes[0] and "denormals-are-zero" in changes[0]
        finally:
            p.kill()
            p.wait()


def _flip_a_byte(path: Path, at: int = -2) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_helper_hidden_from_the_workers_report_is_still_listed(tmp_path):
    """A kernel that removes its helper module from the worker's report (deletes it from
    sys.modules and rebinds the worker's own loaded_files) and maps a shared object from
    elsewhere: both are in the certificate (the checker walks the kernel's source tree and
    reads the worker's memory map), and a byte swapped in either rejects it."""
    import json
    from kcontract.records.certify import certify, verify_certificate
    so_src = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                               "/lib/aarch64-linux-gnu/libm.so.6", "/usr/lib64/libm.so.6")
                   if os.path.isfile(p)), None)
    if so_src is None:
        pytest.skip("no libm to copy here")
    pkg, lib = tmp_path / "kern", tmp_path / "elsewhere"
    pkg.mkdir()
    lib.mkdir()
    so = lib / "libkcfake.so"
    shutil.copy(so_src, so)
    (pkg / "hidden_helper.py").write_text("import numpy as np\n\n\ndef mm(a, b):\n"
                                         "    return np.matmul(a, b)\n")
    (pkg / "kern.py").write_text(
        "import ctypes\nimport sys\n\nimport hidden_helper\n\n"
        f"ctypes.CDLL({str(so)!r})\n_mm = hidden_helper.mm\ndel sys.modules['hidden_helper']\n"
        "_main = sys.modules['__main__']\n_real = _main.loaded_files\n"
        "_main.loaded_files = lambda: [f for f in _real() if 'hidden_helper' not in f]\n\n\n"
        "def matmul(a, b):\n    return _mm(a, b)\n")
    cert = certify(f"{pkg / 'kern.py'}:matmul", op="matmul", dtype="float32", level=1)
    paths = [m["path"] for m in cert["modules"]]
    assert str(pkg / "hidden_helper.py") in paths, paths
    assert str(so) in paths, paths
    assert "enforced" in cert["limits"]["memory"] and cert["fp_state"] in ("checker (ptrace)",
                                                                       "worker-reported")
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cert))
    assert verify_certificate(str(p)).ok
    for victim in (pkg / "hidden_helper.py", so):
        original = victim.read_bytes()
        _flip_a_byte(victim)
        ver = verify_certificate(str(p))
        mods = next(c for c in ver.checks if c.name == "modules")
        assert mods.ok is False and victim.name in mods.message and not ver.ok
        victim.write_bytes(original)
    assert verify_certificate(str(p)).ok


def test_judging_that_fails_on_the_kernels_values_is_the_kernels_verdict(monkeypatch, tmp_path):
    """A comparison that raises on the values one kernel returned is that kernel's error
    verdict (kernel.unjudgeable-output); one that raises whatever the output (a bug of the
    checker) stays checker.bug."""
    from kcontract.check import engine
    real = engine.Context.evaluate

    def fragile(self, case, inputs, out, *a, **kw):
        if np.any(np.asarray(out, dtype=np.float64) == 7.0):  # values only a kernel returns
            raise OverflowError("cannot judge a seven")
        return real(self, case, inputs, out, *a, **kw)

    d = tmp_path
    (d / "sevens.py").write_text("import numpy as np\n\n\ndef k(a, b):\n    out = np.matmul(a, b)\n"
                                 "    out[0, 0] = 7.0\n    return out\n")
    monkeypatch.setattr(engine.Context, "evaluate", fragile)
    run = check(f"{d / 'sevens.py'}:k", op="matmul", dtype="float32", classes=["C-PRC-01"])
    assert [(r.signature or {}).get("code") for r in run.results] == ["kernel.unjudgeable-output"]
    assert "seven" in run.results[0].message

    def broken(self, *a, **kw):
        raise OverflowError("a bug in the comparison")

    monkeypatch.setattr(engine.Context, "evaluate", broken)
    run = check(f"{d / 'sevens.py'}:k", op="matmul", dtype="float32", classes=["C-PRC-01"])
    assert [(r.signature or {}).get("code") for r in run.results] == ["checker.bug"]
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
