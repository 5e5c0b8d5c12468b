"""The adversarial corpus: every gaming kernel in tests/adversarial/ is caught with
the class or error code its file names, and leaves the checker intact (its process,
the files and processes around it, the runs after it); the honest kernels there are
not flagged."""
from __future__ import annotations

import importlib.util
import os
import sysconfig
import time
from pathlib import Path

import numpy as np
import pytest

from kcontract.check.jail import detect
from kcontract.check.runner import check

CORPUS = Path(__file__).parent / "adversarial"
SANDBOXED = detect().isolated
#: where attacks try to leave files the checker would later trust (each attack names
#: what it tries in its docstring); none may appear
MARKERS = [Path(sysconfig.get_paths()["purelib"]) / "kcadv_marker.pth",
           Path(importlib.util.find_spec("kcontract").origin).parent / "__pycache__"
           / "kcadv_marker.pyc"]
SURVIVOR = "kcadv-survivor"


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


#: the attack families of the threat model (docs/threat-model.md); 0: the classic gaming
#: kernels (wrong results dressed up), 1-8: attacks on the checker itself
FAMILIES = {0: "gaming the numerics", 1: "the parent believing the worker about the output",
            2: "integrity flags computed in the kernel's process",
            3: "files the checker executes or trusts", 4: "survivors and unauthenticated records",
            5: "the parent's memory", 6: "seeds", 7: "liveness",
            8: "what one call cannot see"}


def test_the_corpus_is_complete():
    assert len(GAMING) >= 60 and len(HONEST) >= 3
    per_family = {}
    for p in FILES:
        c = _constants(p)
        assert {"OP", "DTYPE", "FRAMEWORK", "CLASSES", "EXPECTED", "FAMILY"} <= set(c), p.name
        assert (c["EXPECTED"] is None) == p.name.startswith("honest_"), p.name
        assert c["FAMILY"] in FAMILIES, p.name
        if c["EXPECTED"] is not None:
            per_family[c["FAMILY"]] = per_family.get(c["FAMILY"], 0) + 1
    thin = {FAMILIES[f]: per_family.get(f, 0) for f in FAMILIES if per_family.get(f, 0) < 3}
    assert not thin, f"families with fewer than three attacks: {thin}"


def _check(path: Path, **kw):
    c = _constants(path)
    if c.get("REQUIRES_SANDBOX") and not SANDBOXED:
        pytest.skip("this attack is only safe to run against a sandboxed checker")
    if c.get("REQUIRES_LIMITS"):
        from kcontract.check.limits import enforceable
        if not set(c["REQUIRES_LIMITS"]) <= enforceable():
            pytest.skip(f"no cgroup can enforce {c['REQUIRES_LIMITS']} here")
    from kcontract.check import sandbox
    budget = sandbox.DECOY_SECONDS
    saved = {k: os.environ.get(k) for k in c.get("LIMITS", {})}
    os.environ.update(c.get("LIMITS", {}))  # the attack's small limits, for this check only
    # an attack that counts calls: the full burst of decoys however loaded the machine is
    sandbox.DECOY_SECONDS = c.get("DECOY_SECONDS", budget)
    seed = kw.pop("seed", c.get("SEED", 0))
    if seed == "random":
        import secrets
        seed = secrets.randbelow(2 ** 31 - 1) + 1
    try:
        run = check(f"{path}:kernel", op=c["OP"], dtype=c["DTYPE"], framework=c["FRAMEWORK"],
                    classes=c["CLASSES"], timeout=c.get("TIMEOUT", 30), seed=seed,
                    declare=c.get("DECLARE"), **kw)
    finally:
        sandbox.DECOY_SECONDS = budget
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return c, run


def _survivors() -> list:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if SURVIVOR.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def assert_checker_intact(canary: Path) -> None:
    """Nothing an attack tried outlived its check: this process's numerics, the files a
    later run would execute or trust, and no process of the attack still running."""
    from kcontract.adapters.base import flush_to_zero_active
    assert "KCONTRACT_ADVERSARIAL_PWNED" not in os.environ
    assert not flush_to_zero_active()
    assert not np.allclose(0.0, 1.0) and np.geterr()["over"] != "raise"
    assert not list(canary.iterdir()), f"an attack wrote {list(canary.iterdir())}"
    planted = [m for m in MARKERS if m.exists()]
    for m in planted:
        m.unlink()
    assert not planted, f"an attack planted {planted}"
    deadline = time.monotonic() + 3.0
    while _survivors() and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _survivors()
    for pid in alive:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert not alive, f"processes of the attack survived its check: {alive}"


@pytest.fixture
def canary(tmp_path, monkeypatch):
    """A folder attacks try to write into (as they would into a run's JSON or report);
    the signing key made to exist, so an attack that reads it would find one."""
    from kcontract.records.signing import signer
    signer()
    d = tmp_path / "canary"
    d.mkdir()
    monkeypatch.setenv("KCONTRACT_ADV_CANARY", str(d))
    return d


def assert_caught(path: Path, c: dict, run) -> None:
    expected = c["EXPECTED"]
    wanted = [expected] if isinstance(expected, str) else list(expected)
    assert run.verdict != "conformant", f"{path.name} passed every contract it was checked on"
    found = [(r.contract, r.verdict.value, (r.signature or {}).get("code")) for r in run.results]
    hits = [r for r in run.results for w in wanted
            if (w.startswith("C-") and r.contract == w and r.verdict.value == "violation")
            or (not w.startswith("C-") and r.verdict.value == "error"
                and (r.signature or {}).get("code") == w)]
    assert hits, f"{path.name}: expected {' or '.join(wanted)}, got {found}"


@pytest.mark.parametrize("path", GAMING, ids=[p.stem for p in GAMING])
def test_gaming_kernel_is_caught(path, canary):
    c, run = _check(path)
    try:
        assert_caught(path, c, run)
    finally:
        assert_checker_intact(canary)
    if c["FAMILY"] in (3, 4, 5, 7):  # attacks on the checker: every run records its sandbox
        assert run.sandbox == ("bubblewrap" if SANDBOXED else "none")


@pytest.mark.parametrize("path", HONEST, ids=[p.stem for p in HONEST])
def test_honest_kernel_is_not_flagged(path, canary):
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
    for name in ("flush_to_zero", "patch_code_object", "numpy_errstate", "channel_pickle",
                 "f1_forged_reply_frame", "f7_half_frame"):
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


def test_later_runs_are_unaffected(canary):
    """After attacks on the checker (a survivor, a forged frame, a half frame, a huge
    reply, a lowered limit), the next checks in this process still judge right: an
    honest kernel passes and a wrong one is still caught."""
    for name in ("f4_double_fork_setsid", "f1_forged_reply_frame", "f7_half_frame",
                 "f7_huge_reply", "f7_prlimit_checker"):
        _check(CORPUS / f"{name}.py")
    assert_checker_intact(canary)
    _, run = _check(CORPUS / "honest_blocked.py")
    assert run.verdict == "conformant", [(r.id, r.message) for r in run.results]
    c, run = _check(CORPUS / "constant_output.py")
    assert_caught(CORPUS / "constant_output.py", c, run)


KB = Path(__file__).parent / "kernelbench"


def test_kernelbench_build_seed_gives_nothing_away():
    """Family 6: the seed a KernelBench candidate's torch is built with (what it reads back
    with torch.initial_seed()) is not the run's seed, and the inputs it would regenerate
    from it are not the inputs it gets."""
    pytest.importorskip("torch")
    from kcontract.check.seeds import derive_seed
    from kcontract.integrations.kernelbench.check import load_problem, make_inputs
    problem = load_problem(str(KB / "matmul" / "problem.py"))
    seed = 12345
    build, inputs = derive_seed(seed, "build"), derive_seed(seed, "inputs")
    assert len({seed, build, inputs, derive_seed(seed, "order")}) == 4
    assert derive_seed(seed, "build") == build  # deterministic: a failure still reproduces
    given = make_inputs(problem, {}, "problem", "float32", inputs)
    guessed = make_inputs(problem, {}, "problem", "float32", build)
    assert not np.array_equal(given[0], guessed[0])
    with pytest.raises(ValueError):
        derive_seed(seed, "anything")


def test_kernelbench_problem_runs_once_in_the_checker(tmp_path, run_cli):
    """Family 3: the problem file is executed once by the checker, before any candidate
    runs, however many candidates are checked (a candidate able to rewrite it would
    otherwise have its code run in the checker)."""
    pytest.importorskip("torch")
    log = tmp_path / "loads.log"
    src = (KB / "matmul" / "problem.py").read_text()
    (tmp_path / "problem.py").write_text(
        "import os\ntry:\n    with open(%r, 'a') as _fh:\n        _fh.write(str(os.getpid()) + '\\n')\n"
        "except OSError:\n    pass\n" % str(log) + src)
    cands = [str(KB / "matmul" / "new_honest.py"), str(KB / "matmul" / "new_empty.py")]
    code, out, err = run_cli("kernelbench", tmp_path / "problem.py", *cands, "--contract",
                             "C-PRC-01", "--no-kernelbench", "--seed", "3")
    assert code == 1, out + err  # new_empty is caught
    loads = log.read_text().split()
    assert loads == [str(os.getpid())], loads  # once, in this process; never in a worker


def test_after_the_limit_attacks_later_runs_are_unaffected(canary):
    """A fork bomb and a memory hog stopped by the worker's cgroup leave nothing behind:
    no process, no cgroup of this checker, and the next checks judge right."""
    from kcontract.check import limits
    if not SANDBOXED or not {"memory", "processes"} <= limits.enforceable():
        pytest.skip("no cgroup can enforce the worker's limits here")
    for name in ("f7_fork_bomb", "f7_memory_past_cgroup"):
        c, run = _check(CORPUS / f"{name}.py")
        assert_caught(CORPUS / f"{name}.py", c, run)
        assert run.limits["memory"]["enforced"].startswith("cgroup")
    assert_checker_intact(canary)
    mounts, mine = limits._mounts(), limits.own_cgroups()
    for hier in ("memory", "pids"):
        folder = os.path.join(mounts.get(hier, "/nonexistent"), mine.get(hier, "/").lstrip("/"))
        if os.path.isdir(folder):
            left = [d for d in os.listdir(folder) if d.startswith(f"{limits.PREFIX}{os.getpid()}-")]
            assert not left, left
    _, run = _check(CORPUS / "honest_blocked.py")
    assert run.verdict == "conformant", [(r.id, r.message) for r in run.results]
    assert run.limits["processes"]["limit"] == limits.DEFAULT_PROCESSES  # the attack's 64 is gone
    c, run = _check(CORPUS / "constant_output.py")
    assert_caught(CORPUS / "constant_output.py", c, run)
