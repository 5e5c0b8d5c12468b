"""KernelBench-format problems: the generic module path, the candidate worker, the
reproduction of KernelBench's own check, and ``kcontract kernelbench``."""
from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kcontract.errors import UsageError  # noqa: E402
from kcontract.integrations.kernelbench.check import (MODULE_CLASSES, check_kernelbench, load_problem,  # noqa: E402
                                   make_inputs, shape_variants)

KB = Path(__file__).parent / "kernelbench"
CANDIDATES = sorted(KB.glob("*/new_*.py"))
SEED = 5


def expected(path: Path) -> dict:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EXPECTED"
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} has no EXPECTED")


@pytest.mark.parametrize("cand", CANDIDATES, ids=[f"{p.parent.name}-{p.stem}" for p in CANDIDATES])
def test_candidate_verdicts_and_kernelbench_column(cand):
    want = expected(cand)
    # honest candidates face every class; a gaming one only the class that must catch it
    # (or C-PRC-01, where an integrity check must stop it on the first call)
    classes = sorted({c if c.startswith("C-") else "C-PRC-01" for c in want["kcontract"]}) or None
    run = check_kernelbench(str(cand.parent / "problem.py"), str(cand), seed=SEED, classes=classes)
    if want["kcontract"]:
        missing = set(want["kcontract"]) - set(run.failing)
        assert not missing, f"{cand.name}: {missing} not reported; failing={run.failing}"
        if "code" in want:  # caught for the right reason, not by a neighbouring check
            cls = want["code"].split(".")[0]
            (res,) = [r for r in run.run.results if r.contract == cls]
            assert res.signature["code"] == want["code"], (res.signature, res.message)
    else:
        bad = [(r.contract, r.message) for r in run.run.results
               if r.verdict.value not in ("pass", "skipped")]
        assert run.verdict == "conformant", f"{cand.name} flagged: {bad}"
    if want["kernelbench"] is not None:
        assert run.kernelbench["passed"] is want["kernelbench"], run.kernelbench
    assert run.kernelbench["trials"] == 5


def test_every_problem_has_an_honest_candidate_and_kernelbench_is_fooled():
    problems = sorted(p.parent for p in KB.glob("*/problem.py"))
    assert len(problems) >= 3
    fooled = [c for c in CANDIDATES if expected(c)["kernelbench"] and expected(c)["kcontract"]]
    assert len(fooled) >= 6
    for folder in problems:
        assert (folder / "new_honest.py").exists()
    # each kind of KernelBench problem faces the five hacks
    hacks = ("new_bf16.py", "new_cached.py", "new_shape_only.py", "new_skipped_tails.py",
             "new_zeros_large.py")
    for kind in ("bmm", "sum_reduce", "gelu", "conv2d", "cross_entropy", "conv_bias_relu_gn",
                 "matmul_scale_residual"):
        assert all((KB / kind / h).exists() for h in hacks), kind


def test_problem_constants_and_shape_variants():
    p = load_problem(str(KB / "gemm_gelu" / "problem.py"))
    assert p.name == "gemm_gelu"
    # scaling_factor is a float and stays; ints read by get_inputs/get_init_inputs rescale
    assert p.constants == {"batch_size": 32, "in_features": 128, "out_features": 64}
    variants = dict(shape_variants(p.constants))
    assert variants["basic"] == {}
    assert variants["plus-one"] == {"batch_size": 33, "in_features": 129, "out_features": 65}
    prime = variants["prime"]
    assert all(all(v % d for d in range(2, v)) for v in prime.values())
    # equal constants stay equal
    assert dict(shape_variants({"M": 64, "N": 64}))["prime"] == {"M": 37, "N": 37}
    with p.sized({"batch_size": 3}):
        assert p.module.get_inputs()[0].shape == (3, 128)
    assert p.module.batch_size == 32


def test_input_families_replace_floats_and_round_to_the_dtype():
    import ml_dtypes
    import numpy as np
    p = load_problem(str(KB / "softmax" / "problem.py"))
    rand = make_inputs(p, {"dim": 64}, "problem", "float32", 1)[0]
    assert rand.shape == (16, 64) and rand.min() >= 0
    normal = make_inputs(p, {"dim": 64}, "normal", "bfloat16", 1)[0]
    assert normal.dtype == ml_dtypes.bfloat16 and (normal.astype(np.float32) < 0).any()


def test_tolerance_from_the_reference_and_a_secret_seed():
    run = check_kernelbench(str(KB / "matmul" / "problem.py"), str(KB / "matmul" / "new_honest.py"),
                            classes=["C-PRC-01"], kernelbench=False)
    assert run.allowance["n"] == 96  # K: a row of A, a column of B
    assert run.allowance["stages"] >= 4
    (res,) = run.run.results
    assert "pgamma" in res.tolerance and "n=96" in res.tolerance
    # no seed given: a secret one, drawn for this run and reported with the reproduce line
    assert isinstance(run.seed, int) and f"--seed {run.seed}" in res.reproduce


def test_half_precision_honest_candidate_conforms():
    run = check_kernelbench(str(KB / "softmax" / "problem.py"), str(KB / "softmax" / "new_honest.py"),
                            dtype="bfloat16", classes=["C-PRC-01"], seed=SEED)
    assert run.verdict == "conformant", [r.message for r in run.run.results]
    assert run.kernelbench["atol"] == 1e-2 and run.kernelbench["passed"]


def test_candidate_that_does_not_build_is_an_error(tmp_path):
    bad = tmp_path / "new_broken.py"
    bad.write_text("import torch\nclass ModelNew(torch.nn.Module):\n"
                   "    def __init__(self):\n        raise RuntimeError('no kernel today')\n")
    run = check_kernelbench(str(KB / "matmul" / "problem.py"), str(bad), seed=SEED,
                            classes=["C-PRC-01"])
    assert run.verdict == "error"
    assert "no kernel today" in run.run.results[0].message
    assert run.kernelbench["passed"] is False


def test_usage_errors(tmp_path):
    notaproblem = tmp_path / "p.py"
    notaproblem.write_text("x = 1\n")
    with pytest.raises(UsageError, match="not a KernelBench problem"):
        check_kernelbench(str(notaproblem), str(KB / "matmul" / "new_honest.py"))
    with pytest.raises(UsageError, match="dtype"):
        check_kernelbench(str(KB / "matmul" / "problem.py"), str(KB / "matmul" / "new_honest.py"),
                          dtype="float64")
    with pytest.raises(UsageError, match="C-PRC-03"):
        check_kernelbench(str(KB / "matmul" / "problem.py"), str(KB / "matmul" / "new_honest.py"),
                          classes=["C-PRC-03"])
    assert MODULE_CLASSES[-1] == "C-CMP-03"


def test_cli_comparison_table(run_cli, tmp_path):
    out_json, out_md = tmp_path / "runs.json", tmp_path / "table.md"
    code, stdout, stderr = run_cli(
        "kernelbench", KB / "matmul" / "problem.py", KB / "matmul" / "new_honest.py",
        KB / "matmul" / "new_tiled_shape.py", "--seed", SEED, "--contract", "C-CMP-03",
        "--json", out_json, "--markdown", out_md)
    assert code == 1, stderr
    assert "KernelBench" in stdout and "new_tiled_shape.py" in stdout
    assert "1 of 2 candidates pass KernelBench's check but break a contract" in stdout
    data = json.loads(out_json.read_text())
    verdicts = {Path(r["candidate"]).name: (r["kernelbench"]["passed"], r["verdict"], r["failing"])
                for r in data["runs"]}
    assert verdicts["new_honest.py"] == (True, "conformant", [])
    assert verdicts["new_tiled_shape.py"] == (True, "violation", ["C-CMP-03"])
    assert "| matmul | new_tiled_shape.py | pass | violation | C-CMP-03 |" in out_md.read_text()


def test_cli_usage_error_exit_code(run_cli, tmp_path):
    notaproblem = tmp_path / "p.py"
    notaproblem.write_text("x = 1\n")
    code, _, stderr = run_cli("kernelbench", notaproblem, KB / "matmul" / "new_honest.py")
    assert code == 2 and "not a KernelBench problem" in stderr
    # a run in which every class was skipped checked nothing: not a pass
    code, _, stderr = run_cli("kernelbench", KB / "matmul" / "problem.py",
                              KB / "matmul" / "new_honest.py", "--contract", "C-ORD-02",
                              "--declare", "deterministic=false", "--no-kernelbench")
    assert code == 2 and "nothing was checked for new_honest.py" in stderr


@pytest.mark.parametrize("cand,code,says", [
    ("new_contiguous_only.py", "C-CMP-03.layout-specialised", "views of the same values"),
    ("new_after_reference.py", "C-CMP-03.order-dependent", "not after the reference ran"),
    ("new_tiled_shape.py", "C-CMP-03.shape-specialised", "wrong at rescaled shapes"),
])
def test_cmp03_signature_codes(cand, code, says):
    run = check_kernelbench(str(KB / "matmul" / "problem.py"), str(KB / "matmul" / cand),
                            seed=SEED, classes=["C-CMP-03"], kernelbench=False)
    (r,) = run.run.results
    assert r.verdict.value == "violation", r.message
    assert r.signature["code"] == code and says in r.message


def test_a_problem_may_import_its_neighbours(tmp_path):
    """The problem file is loaded here as the candidate's worker loads it: its folder is
    importable, so a problem split over two files works in both."""
    shutil.copytree(KB / "matmul", tmp_path / "p")
    (tmp_path / "p" / "sizes.py").write_text("M, K, N = 64, 96, 48\n")
    text = (tmp_path / "p" / "problem.py").read_text()
    (tmp_path / "p" / "problem.py").write_text(
        text.replace("M = 64\nK = 96\nN = 48\n", "from sizes import M, K, N  # noqa: E402\n"))
    assert "from sizes import" in (tmp_path / "p" / "problem.py").read_text()
    p = load_problem(str(tmp_path / "p" / "problem.py"))
    assert p.module.M == 64


def test_a_failure_of_the_checker_on_the_problems_values_is_a_verdict(monkeypatch):
    """A step of the checker that cannot handle a problem's inputs or outputs gives an error
    verdict with a code for that class; the other classes still run and the run has JSON."""
    from kcontract.integrations.kernelbench import check as kb

    def broken(self, args, layout):
        raise TypeError("torch.bool is not supported by torch.iinfo")

    monkeypatch.setattr(kb.Oracle, "accepts_layout", broken)
    run = check_kernelbench(str(KB / "masked" / "problem.py"), str(KB / "masked" / "new_honest.py"),
                            seed=SEED, classes=["C-PRC-01", "C-CMP-03"], kernelbench=False)
    by = {r.contract: r for r in run.run.results}
    assert by["C-PRC-01"].verdict.value == "pass"
    err = by["C-CMP-03"]
    assert err.verdict.value == "error" and err.signature["code"] == "checker.problem-io"
    assert "TypeError" in err.message and "no verdict on the candidate" in err.message
    json.dumps(run.to_json())


def test_bool_inputs_survive_every_layout():
    """The strided layout fills its gaps for bool tensors too (torch.iinfo rejects bool)."""
    from kcontract.adapters.torch_adapter import TorchAdapter
    mask = torch.tensor([[True, False, True], [False, True, True]])
    for lay in ("transposed", "strided"):
        view = TorchAdapter().relayout(mask, lay)
        assert torch.equal(view, mask) and (lay == "transposed" or not view.is_contiguous())


def test_dropout_problem_is_checked_in_eval_mode():
    run = check_kernelbench(str(KB / "dropout" / "problem.py"),
                            str(KB / "dropout" / "new_honest.py"), seed=SEED,
                            classes=["C-PRC-01"], kernelbench=False)
    assert run.verdict == "conformant", [r.message for r in run.run.results]


def test_scale_rewrites_sizes_in_tuples_and_the_sizes_derived_from_them():
    p = load_problem(str(KB / "layernorm" / "problem.py"), scale=0.5)
    # the tuple's size is scaled, the value derived from it at import follows; 4 is no size
    assert p.module.features == (4, 48) and p.module.dim == 48 and p.module.batch_size == 8
    assert p.scaling.reduced and p.scaling.sizes["features[1]"] == (96, 48)
    assert "features[1] 96->48" in p.scaling.describe()
    # the file itself is unchanged, and the unscaled problem has its own sizes
    assert load_problem(str(KB / "layernorm" / "problem.py")).module.dim == 96
    with pytest.raises(UsageError, match="--scale"):
        load_problem(str(KB / "layernorm" / "problem.py"), scale=2.0)


def test_max_elements_picks_the_scale_and_the_run_reports_it():
    from kcontract.integrations.kernelbench.scale import largest_input
    p = load_problem(str(KB / "softmax" / "problem.py"), max_elements=20000)
    assert 5000 < largest_input(p.module) <= 20000  # 16 x 16384 at full size
    run = check_kernelbench(str(KB / "softmax" / "problem.py"),
                            str(KB / "softmax" / "new_honest.py"), seed=SEED,
                            classes=["C-PRC-01"], problem=p)
    assert run.verdict == "conformant"
    data = run.to_json()
    assert data["scale"]["reduced"] and data["scale"]["max_elements"] == 20000
    assert data["scale"]["sizes"]["dim"]["used"] < 16384
    assert "--max-elements 20000" in run.run.results[0].reproduce
    # KernelBench's own check ran at the same reduced sizes, in the candidate's process
    assert run.kernelbench["passed"]


def test_sizes_are_literals_not_attribute_names():
    """``self.dim`` in the model is no read of a module constant: the constant ``dim`` is
    derived here, and the literals that make it are what the sweep rescales."""
    p = load_problem(str(KB / "layernorm" / "problem.py"))
    assert p.constants == {"batch_size": 16, "features[1]": 96}
    labels = [lab for lab, _ in shape_variants(p.constants)]
    assert "prime:batch_size" in labels and "plus-one:features[1]" in labels
    with p.sized({"features[1]": 7}):
        assert p.module.get_inputs()[0].shape == (16, 4, 7) and p.module.dim == 7
    assert p.module.dim == 96


def test_shape_hack_on_sizes_in_a_tuple_is_caught():
    run = check_kernelbench(str(KB / "layernorm" / "problem.py"),
                            str(KB / "layernorm" / "new_fixed_shape.py"), seed=SEED,
                            classes=["C-CMP-03"], kernelbench=False)
    (r,) = run.run.results
    assert r.verdict.value == "violation" and r.signature["code"] == "C-CMP-03.shape-specialised"


def test_no_buildable_variant_is_inconclusive_not_a_pass():
    run = check_kernelbench(str(KB / "fixed_shape" / "problem.py"),
                            str(KB / "fixed_shape" / "new_honest.py"), seed=SEED,
                            classes=["C-CMP-03"], kernelbench=False)
    (r,) = run.run.results
    assert r.verdict.value == "skipped" and r.message.startswith("inconclusive")
    assert "rejects all" in r.message


def test_conditioning_lets_an_honest_norm_pass_on_offset_inputs_and_says_so():
    """A two-pass fp32 LayerNorm errs far beyond a fixed-factor allowance on offset inputs
    (the centring cancels); the measured sensitivity of the float64 reference accounts
    for it, names the input as ill-conditioned, and a bfloat16 computation still fails."""
    honest = check_kernelbench(str(KB / "layernorm" / "problem.py"),
                               str(KB / "layernorm" / "new_honest.py"), seed=SEED,
                               classes=["C-PRC-02"], kernelbench=False)
    (r,) = honest.run.results
    assert r.verdict.value == "pass" and "ill-conditioned" in r.message, r.message
    assert "sens" in r.tolerance
    half = check_kernelbench(str(KB / "layernorm" / "problem.py"),
                             str(KB / "layernorm" / "new_half_stats.py"), seed=SEED,
                             classes=["C-PRC-02"], kernelbench=False)
    (h,) = half.run.results
    assert h.verdict.value == "violation" and "the excess is the kernel's" in h.message


def test_cli_scale_says_the_check_ran_at_a_reduced_size(run_cli, tmp_path):
    out_json = tmp_path / "runs.json"
    code, stdout, stderr = run_cli(
        "kernelbench", KB / "layernorm" / "problem.py", KB / "layernorm" / "new_honest.py",
        "--seed", SEED, "--contract", "C-PRC-01", "--scale", "0.5", "--no-kernelbench",
        "--json", out_json)
    assert code == 0, stdout + stderr
    assert "checked at a reduced size (--scale 0.5)" in " ".join((stdout + stderr).split())
    (run,) = json.loads(out_json.read_text())["runs"]
    assert run["scale"]["sizes"]["batch_size"] == {"written": 16, "used": 8}
    assert run["run"]["environment"]["problem_scale"]["reduced"] is True


@pytest.mark.parametrize("cand", ["new_honest.py", "new_half_rate.py", "new_no_dropout.py"])
def test_train_mode_draws_the_same_masks_on_both_sides(cand):
    """--train: both models in training mode, each forward pass seeded alike on both sides,
    so an honest dropout passes; one that drops another fraction, or none, is caught (in
    eval mode both are honest: the generic candidate test runs them there)."""
    want = expected(KB / "dropout" / cand)["train"]
    run = check_kernelbench(str(KB / "dropout" / "problem.py"), str(KB / "dropout" / cand),
                            seed=SEED, classes=["C-PRC-01", "C-ORD-02"], kernelbench=False,
                            train=True)
    assert run.to_json()["mode"] == "train" and "--train" in run.run.results[0].reproduce
    if want:
        assert set(want) <= set(run.failing), run.failing
        (prc,) = [r for r in run.run.results if r.contract == "C-PRC-01"]
        assert prc.signature["code"] == "C-PRC-01.inaccurate"
    else:
        assert run.verdict == "conformant", [r.message for r in run.run.results]
    # identical inputs, identical masks: training mode stays deterministic per call
    (det,) = [r for r in run.run.results if r.contract == "C-ORD-02"]
    assert det.verdict.value == "pass", det.message


def _held_array_bytes(root) -> int:
    """Bytes of the numpy arrays reachable from ``root`` through containers and instance
    attributes (not through modules, classes, functions or torch objects)."""
    import types

    import numpy as np
    seen, total, stack = set(), 0, [root]
    skip = (types.ModuleType, type, types.FunctionType, types.MethodType,
            types.BuiltinFunctionType, torch.nn.Module, torch.Tensor)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            total += obj.nbytes
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__dict__"):
            stack.extend(vars(obj).values())
    return total


def test_memory_held_does_not_grow_with_the_number_of_cases(monkeypatch):
    """Cases stream: after a class, the check holds summaries and digests of its cases,
    not their arrays, so what it holds is the same for 2 fresh calls or 16."""
    from kcontract.integrations.kernelbench import check as kb
    held, cases = {}, {}
    original = kb.ModuleCheck.run_class

    def spy(self, cls):
        res = original(self, cls)
        held[kb.FRESH_CALLS] = _held_array_bytes(self)
        cases[kb.FRESH_CALLS] = res.cases
        return res

    monkeypatch.setattr(kb.ModuleCheck, "run_class", spy)
    for n in (2, 16):
        monkeypatch.setattr(kb, "FRESH_CALLS", n)
        run = check_kernelbench(str(KB / "matmul" / "problem.py"),
                                str(KB / "matmul" / "new_honest.py"), seed=SEED,
                                classes=["C-CMP-03"], kernelbench=False)
        assert run.verdict == "conformant"
    assert cases[16] == cases[2] + 14
    assert held[16] == held[2], held


MEMORY_HUNGRY = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.dtype == torch.float64:  # the float64 oracle needs more than the machine has
            torch.empty(1 << 46)
        return x * 2


batch_size = 16
dim = 32


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
'''


def test_memory_running_out_in_the_oracle_is_a_verdict(run_cli, tmp_path):
    (tmp_path / "problem.py").write_text(MEMORY_HUNGRY)
    (tmp_path / "new.py").write_text("import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                                     "    def forward(self, x):\n        return x + x\n")
    out_json = tmp_path / "runs.json"
    code, stdout, stderr = run_cli("kernelbench", tmp_path / "problem.py", tmp_path / "new.py",
                                   "--seed", SEED, "--contract", "C-PRC-01", "--contract",
                                   "C-CMP-03", "--no-kernelbench", "--json", out_json)
    assert code == 1 and "Traceback" not in stderr, stderr
    (run,) = json.loads(out_json.read_text())["runs"]
    codes = {r["contract"]: (r["verdict"], r["signature"]["code"]) for r in run["run"]["results"]}
    assert codes == {"C-PRC-01": ("error", "checker.memory"),
                     "C-CMP-03": ("error", "checker.memory")}, codes


def test_a_problem_is_an_op():
    """The problem as an op: inputs in get_inputs() order, its size literals as symbols,
    the rescaled shapes as its shape class, the float64 Model at each shape as its oracle."""
    import numpy as np

    from kcontract.formats import get_format
    from kcontract.integrations.kernelbench.problem_op import ProblemOp
    from kcontract.ops.base import Op
    p = load_problem(str(KB / "cross_entropy" / "problem.py"))
    op = ProblemOp.of(p, "float32", build_seed=1, input_seed=2)
    assert isinstance(op, Op) and op.inputs == ("arg0", "arg1")
    assert op.basic_shape == {"batch_size": 64, "num_classes": 48}
    assert {"batch_size": 65, "num_classes": 49} in op.shape_class
    smaller = {"batch_size": 5, "num_classes": 7}
    assert op.input_shapes(smaller) == {"arg0": (5, 7), "arg1": (5,)}
    x = op.generate(smaller, get_format("float32"), "normal", np.random.default_rng(0))
    assert x["arg0"].dtype == np.float32 and x["arg1"].dtype.kind == "i"
    assert x["arg1"].max() < 7  # the targets follow the class count derived at import
    assert op.output_shape(smaller) == ()
    logits = x["arg0"].astype(np.float64)
    lse = np.log(np.exp(logits).sum(axis=1))
    want = np.mean(lse - logits[np.arange(5), x["arg1"]])
    assert np.isclose(op.oracle(x), want, rtol=1e-12)


def test_candidate_worker_answers_the_kernel_workers_verbs_and_the_run_records_it():
    """The candidate's worker serves the kernel worker's verbs (``modules`` among them), and
    a run records what it records for any kernel: the modules, the limits, the FP reader."""
    from kcontract.integrations.kernelbench.check import ModelProcess
    cand = KB / "matmul" / "new_honest.py"
    with ModelProcess(str(cand), dtype="float32") as handle:
        status, payload = handle._request(("modules", {}), 30.0)
        assert status == "ok", payload
        assert str(cand.resolve()) in payload["files"]
    run = check_kernelbench(str(KB / "matmul" / "problem.py"), str(cand), seed=SEED,
                            classes=["C-PRC-01"], kernelbench=False)
    assert str(cand.resolve()) in [m["path"] for m in run.run.modules]
    assert {"memory", "processes"} <= set(run.run.limits)
    assert run.run.fp_state in ("checker (ptrace)", "worker-reported")
