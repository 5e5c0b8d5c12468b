"""For every op: a correct numpy kernel and a correct torch kernel conform to
every contract of the suite that applies; a plainly wrong kernel is flagged.
The CLI's JSON and exit codes are exactly as specified."""
import json
import re

import pytest

from kcontract.check.runner import check
from kcontract.ops import OPS

from conftest import kernel

OP_NAMES = sorted(OPS)
#: cast float32 -> float32 is the identity: the suite checks casts into narrower formats
DTYPE = {"cast": "bfloat16", "scaled_matmul": "float8_e4m3fn", "scaled_matmul_f32": "float8_e5m2"}


@pytest.mark.parametrize("op", OP_NAMES)
def test_correct_numpy_kernel_conforms(op):
    run = check(kernel("correct_numpy.py", op), op=op, dtype=DTYPE.get(op, "float32"))
    assert any(r.verdict.value == "pass" for r in run.results)
    bad = [(r.id, r.verdict.value, r.message) for r in run.results
           if r.verdict.value not in ("pass", "skipped")]
    assert run.results, f"no contract applies to {op}"
    assert not bad, bad
    assert run.verdict == "conformant"


@pytest.mark.parametrize("op", OP_NAMES)
def test_correct_torch_kernel_conforms(op):
    run = check(kernel("correct_torch.py", op), op=op, dtype=DTYPE.get(op, "float32"),
                framework="torch")
    assert any(r.verdict.value == "pass" for r in run.results)
    bad = [(r.id, r.verdict.value, r.message) for r in run.results
           if r.verdict.value not in ("pass", "skipped")]
    assert not bad, bad


@pytest.mark.parametrize("op", OP_NAMES)
def test_plainly_wrong_kernel_is_flagged(op):
    run = check(kernel("wrong_numpy.py", op), op=op, dtype=DTYPE.get(op, "float32"))
    assert run.verdict == "violation", [(r.id, r.verdict.value) for r in run.results]
    assert run.exit_code == 1


def test_cli_json_and_exit_codes(run_cli, tmp_path):
    out = tmp_path / "run.json"
    code, stdout, _ = run_cli("check", kernel("correct_numpy.py", "sum"), "--op", "sum",
                              "--dtype", "float32", "--json", out, "--no-store")
    assert code == 0, stdout
    data = json.loads(out.read_text())
    assert data["schema"] == "kcontract.run/1"
    for key in ("kernel", "op", "dtype", "framework", "claims", "environment", "verdict", "results"):
        assert key in data
    assert data["verdict"] == "conformant"
    assert data["claims"]["accumulate"] == "float32" and data["claims"]["oob"] == "raise"
    for r in data["results"]:
        assert set(r) >= {"contract", "id", "verdict", "signature", "message", "reproduce"}
        assert r["verdict"] in ("pass", "skipped")
    code, stdout, _ = run_cli("check", kernel("wrong_numpy.py", "sum"), "--op", "sum",
                              "--dtype", "float32", "--json", out, "--no-store")
    assert code == 1
    data = json.loads(out.read_text())
    assert data["verdict"] == "violation"
    bad = [r for r in data["results"] if r["verdict"] == "violation"]
    assert bad and all(r["reproduce"].startswith("kcontract check ") for r in bad)
    assert "mismatched elements" in stdout and "reproduce:" in stdout


@pytest.mark.parametrize("args,fragment", [
    (["--op", "matmull", "--dtype", "float32"], "did you mean matmul"),
    (["--op", "matmul", "--dtype", "bfloat61"], "did you mean bfloat16"),
    (["--op", "matmul", "--dtype", "float32", "--declare", "acumulate=float32"], "did you mean accumulate"),
    (["--op", "matmul", "--dtype", "float32", "--declare", "oob=explode"], "oob"),
    (["--op", "matmul", "--dtype", "float32", "--declare", "novalue"], "KEY=VALUE"),
    (["--op", "matmul", "--dtype", "float32", "--framework", "jaxx"], "unknown framework"),
    (["--op", "matmul", "--dtype", "float32", "--contract", "C-PRC-99"], "unknown contract class"),
    (["--dtype", "float32"], "--op is required"),
    (["--op", "matmul", "--dtype", "float32", "--seed", "lucky"], "integer or 'random'"),
    (["--op", "matmul", "--dtype", "float32", "--timeout", "-1"], "not in the range"),
    # a check that checks nothing must not pass: every contract out of scope, or needing a claim
    (["--op", "matmul", "--dtype", "float8_e4m3fn"], "nothing was checked"),
    (["--op", "matmul", "--dtype", "float32", "--contract", "C-ORD-03"], "batch_invariant=True"),
])
def test_cli_usage_errors_exit_2(run_cli, args, fragment):
    code, stdout, stderr = run_cli("check", kernel("correct_numpy.py", "matmul"), *args, "--no-store")
    assert code == 2
    assert fragment in stderr


def test_list_and_explain(run_cli):
    code, out, _ = run_cli("list")
    assert code == 0 and "C-PRC-01" in out and "C-EXC-02" in out
    from kcontract.suite import load_suite
    contract = load_suite()[0]
    code, out, _ = run_cli("explain", contract.id)
    assert code == 0
    for part in ("id", "scope", "precondition", "postcondition", "tolerance", "oracle",
                 "protocol", "signature"):
        assert part in out
    code, out, err = run_cli("explain", "C-PRC-0l")
    assert code == 2 and "did you mean" in err


def test_cli_secret_seed_is_drawn_and_reported(run_cli, tmp_path):
    """--seed random: inputs the kernel cannot know from the public seeds; the seed is
    printed after the run and put in every reproduce line."""
    seeds = []
    for _ in range(2):
        out = tmp_path / "run.json"
        code, _, stderr = run_cli("check", kernel("wrong_numpy.py", "sum"), "--op", "sum",
                                  "--dtype", "float32", "--contract", "C-PRC-01", "--seed",
                                  "random", "--json", out, "--no-store")
        assert code == 1
        m = re.search(r"secret seed of this run: (\d+) \(rerun with --seed \1\)", stderr)
        assert m, stderr
        seeds.append(int(m.group(1)))
        (r,) = json.loads(out.read_text())["results"]
        assert r["reproduce"].endswith(f"--seed {seeds[-1]}")
    assert seeds[0] != seeds[1]
