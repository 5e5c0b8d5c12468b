"""kcontract fingerprint: emulation, recovery of published designs and ordinary stacks."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from kcontract.errors import UsageError
from kcontract.fingerprint import PUBLISHED, PUBLISHED_DTYPES, Design, ProbeFailure, fingerprint
from kcontract.fingerprint.rounding import exact_sum, round_bits, round_to_format

HERE = os.path.dirname(__file__)
KERNELS = os.path.join(HERE, "kernels", "fingerprint_designs.py")
U = 2.0 ** -24  # half an ulp of 1 in a 24-bit significand


# -- rounding ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode, expected", [
    # 1 + u (a tie, even below), 1 + 3u (a tie, even above), -(1 + u)
    ("nearest", [1.0, 1 + 4 * U, -1.0]),
    ("toward_zero", [1.0, 1 + 2 * U, -1.0]),
    ("nearest_away", [1 + 2 * U, 1 + 4 * U, -(1 + 2 * U)]),
    ("up", [1 + 2 * U, 1 + 4 * U, -1.0]),
    ("down", [1.0, 1 + 2 * U, -(1 + 2 * U)]),
])
def test_round_bits_modes_on_ties(mode, expected):
    x = np.array([1 + U, 1 + 3 * U, -(1 + U)])
    assert round_bits(x, None, 24, mode).tolist() == expected


def test_round_bits_uses_the_remainder_as_a_sticky_bit():
    one = np.array([1.0, 1.0 + U])
    # just below 1: truncation gives the largest 24-bit number below 1 (half the spacing)
    assert round_bits(one[:1], np.array([-1e-30]), 24, "toward_zero")[0] == 1 - U
    assert round_bits(one[:1], np.array([-1e-30]), 24, "nearest")[0] == 1.0
    # a tie pushed above by the remainder rounds up, even when the base is even
    assert round_bits(one[1:], np.array([1e-30]), 24, "nearest")[0] == 1 + 2 * U
    hi, lo = exact_sum([np.array([1.0]), np.array([U]), np.array([2.0 ** -80])])
    assert round_bits(hi, lo, 24, "nearest")[0] == 1 + 2 * U


def test_round_to_format_truncates_into_tf32():
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -20])  # just above a tf32 tie
    assert round_to_format(x, "tfloat32", "nearest")[0] == 1 + 2.0 ** -10
    assert round_to_format(x, "tfloat32", "toward_zero")[0] == 1.0


def test_fused_groups_sum_exactly_before_rounding():
    terms = np.array([[1.0, U, U, 0.0]])
    seq = Design(accumulator_bits=24, fused_group=1)
    fused = Design(accumulator_bits=24, fused_group=4)
    assert seq.dots(terms, None, "float32", "float32")[0] == 1.0  # each tie rounds to even
    assert fused.dots(terms, None, "float32", "float32")[0] == 1 + 2 * U


def test_promotion_restarts_the_narrow_accumulator():
    x = np.zeros((1, 8))
    x[0, 0] = 1.0
    x[0, 1:] = 2.0 ** -6  # lost beside 1 in a 4-bit accumulator, exact from zero
    plain = Design(accumulator_bits=4, accumulator_rounding="toward_zero")
    promoted = plain.with_(promotion_interval=4)
    assert plain.dots(x, None, "float32", "float32")[0] == 1.0
    assert promoted.dots(x, None, "float32", "float32")[0] == 1.0 + 4 * 2.0 ** -6


# -- recovery of emulated designs ----------------------------------------------------------

def _check(recipe, design, input_format):
    op_fmt = design.operand_format or input_format
    assert recipe.operand_format == op_fmt
    assert abs(recipe.accumulator_bits - design.accumulator_bits) <= 1
    assert recipe.accumulator_rounding == design.accumulator_rounding
    assert recipe.fused_group == design.fused_group
    assert recipe.promotion_interval == design.promotion_interval
    if design.flush_inputs:
        assert recipe.subnormal_inputs == "flush"
    assert recipe.subnormal_inputs in ("flush" if design.flush_inputs else "preserve", None)
    narrow = design.promotion_interval and design.wide_bits < design.accumulator_bits
    assert recipe.workspace_interval == (design.promotion_interval if narrow else None)
    assert recipe.probes_reproduced == 1.0


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_designs_are_recovered(name):
    design = PUBLISHED[name]
    dtype = PUBLISHED_DTYPES[name]
    recipe = fingerprint(design.matmul, op="matmul", dtype=dtype)
    _check(recipe, design, dtype)
    assert recipe.accumulator_bits == design.accumulator_bits
    assert recipe.reduction_order.startswith("sequential")
    assert all(p.bitwise == 1.0 for p in recipe.sweep)


@pytest.mark.parametrize("design", [
    Design("tf32-truncated", operand_format="tfloat32", operand_rounding="toward_zero"),
    Design("bf16-operands", operand_format="bfloat16"),
    Design("fp16-operands-fp32-acc", operand_format="float16"),
    Design("rounded-products", products_exact=False, accumulator_bits=24),
    Design("wide-rz", accumulator_bits=22, accumulator_rounding="toward_zero", fused_group=2,
           promotion_interval=64),
], ids=lambda d: d.name)
def test_fp32_recipes_are_recovered(design):
    recipe = fingerprint(design.matmul, op="matmul", dtype="float32")
    _check(recipe, design, "float32")
    if design.operand_format is not None:
        assert recipe.operand_rounding == design.operand_rounding
    assert recipe.products == ("exact" if design.products_exact else "rounded")


def test_sum_accumulator_is_recovered():
    design = Design("fp16-like", accumulator_bits=11, fused_group=1)
    recipe = fingerprint(design.sum, op="sum", dtype="float32")
    assert recipe.accumulator_bits == 11 and recipe.accumulator_rounding == "nearest"
    assert recipe.operand_format == "float32" and recipe.products is None


@pytest.mark.parametrize("block, bits, op", [(64, 11, "matmul"), (256, 11, "sum"),
                                             (128, 8, "matmul")])
def test_a_narrow_workspace_between_wide_blocks_is_recovered(block, bits, op):
    """Split-K: blocks summed in fp32, their partial sums added into a narrow workspace
    (the design's promotion with wide_bits below accumulator_bits)."""
    design = Design("split-k", accumulator_bits=24, promotion_interval=block, wide_bits=bits)
    recipe = fingerprint(getattr(design, op), op=op, dtype="float32")
    assert recipe.accumulator_bits == 24 and recipe.promotion_interval is None
    assert (recipe.workspace_interval, recipe.workspace_bits) == (block, bits)
    assert recipe.confidence("workspace_interval") == 1.0
    assert f"blocks of {block} added into a {bits}-bit workspace" in recipe.summary()


def test_a_workspace_the_partials_are_stored_in_is_told_apart():
    """The calibration kernel of prc01-sum rounds each block's partial to fp16 before it
    adds it: the small term is lost at every j past the first block boundary."""
    from kcontract.suite.kernels import prc01_sum
    recipe = fingerprint(prc01_sum.bad, op="sum", dtype="float32")
    assert (recipe.workspace_interval, recipe.workspace_bits) == (256, 11)
    assert recipe.design.partials_rounded and "stored in" in recipe.summary()
    honest = fingerprint(prc01_sum.good, op="sum", dtype="float32")
    assert honest.workspace_interval is None


# -- the matmul inside linear_gelu and attention ------------------------------------------------

def _designs():
    sys.path.insert(0, os.path.dirname(KERNELS))
    try:
        import fingerprint_designs
    finally:
        sys.path.pop(0)
    return fingerprint_designs


@pytest.mark.parametrize("name, operands", [("linear_gelu_fp32", "float32"),
                                            ("linear_gelu_bf16", "bfloat16")])
def test_linear_gelu_matmul_is_recovered(name, operands):
    """Probes whose results are 0 or >= 16 (gelu(v) == v there) read the product inside
    linear_gelu: operand format and accumulator bits as for a matmul."""
    recipe = fingerprint(getattr(_designs(), name), op="linear_gelu", dtype="float32")
    assert recipe.operand_format == operands and recipe.confidence("operand_format") == 1.0
    assert recipe.accumulator_bits == 24 and recipe.accumulator_rounding == "nearest"
    assert recipe.subnormal_inputs is None  # gelu hides them: not measured


def test_linear_gelu_in_its_worker_sees_a_workspace():
    """Through the isolated worker, the calibration kernel of prc01-linear_gelu (K-chunks
    of 64 in fp32, an fp16 workspace between them)."""
    recipe = fingerprint("kcontract.suite.kernels.prc01_linear_gelu:bad", op="linear_gelu",
                         dtype="float32")
    assert recipe.operand_format == "float32"
    assert (recipe.workspace_interval, recipe.workspace_bits) == (64, 11)


@pytest.mark.parametrize("name, pv_bits, score_bits, least", [
    ("attention_fp32", 24, 20, True),          # honest: scores as wide as the readout shows
    ("attention_fp16_scores", 24, 11, False),  # scores stored in fp16 before the softmax
    ("attention_fp16_pv", 11, None, True),     # p @ v in an fp16 register
])
def test_attention_stages_are_recovered(name, pv_bits, score_bits, least):
    """p @ v with q = 0 (probabilities exactly 1/T) gives the accumulator of the second
    product exactly; q k^T through a two-key softmax gives the bits of the scores."""
    recipe = fingerprint(getattr(_designs(), name), op="attention", dtype="float32")
    assert recipe.operand_format == "float32" and recipe.score_operand_format == "float32"
    assert recipe.accumulator_bits == pv_bits
    said_least = recipe.fields["score_bits"].evidence.startswith("at least")
    assert said_least is least
    if score_bits is not None and not least:
        assert recipe.score_bits == score_bits
    elif score_bits is not None:
        assert recipe.score_bits >= score_bits
    if name == "attention_fp16_scores":
        assert "carry 11 bits" in recipe.summary()


def test_attention_pv_probes_use_one_head_width():
    """Every p @ v probe of a recovery (q a single zero row) has the same head width,
    whatever row batch a stage asks (the promotion stage of an 11-bit p @ v asks 16 rows
    per call)."""
    from kcontract.fingerprint.targets import AttentionTarget
    widths = set()

    def recording(q, k, v, causal=False):
        if q.shape[0] == 1 and not np.any(q):
            widths.add(v.shape[-1])
        return _designs().attention_fp16_pv(q, k, v)
    recipe = fingerprint(recording, op="attention", dtype="float32")
    assert recipe.accumulator_bits == 11  # narrow: the promotion stage runs
    assert widths == {AttentionTarget.head_width}


def test_attention_bf16_operands_of_the_scores_are_named():
    def attention_bf16_qk(q, k, v, causal=False):
        import ml_dtypes
        bq = q.astype(ml_dtypes.bfloat16).astype(np.float32)
        bk = k.astype(ml_dtypes.bfloat16).astype(np.float32)
        return _designs().attention_fp32(bq, bk, v)
    recipe = fingerprint(attention_bf16_qk, op="attention", dtype="float32")
    assert recipe.score_operand_format == "bfloat16" and recipe.operand_format == "float32"


def test_stochastic_rounding_is_named():
    rng = np.random.default_rng(5)
    modes = [Design(accumulator_rounding=m) for m in ("nearest", "toward_zero", "up")]

    def matmul(a, b):
        return modes[int(rng.integers(0, 3))].matmul(a, b)
    recipe = fingerprint(matmul, op="matmul", dtype="float32")
    assert recipe.accumulator_rounding == "stochastic"


# -- the ordinary stacks --------------------------------------------------------------------

def test_numpy_openblas_fp32_matmul():
    r = fingerprint(lambda a, b: a @ b, op="matmul", dtype="float32")
    assert (r.operand_format, r.accumulator_bits, r.accumulator_rounding) == (
        "float32", 24, "nearest")
    assert r.products == "exact"  # fused multiply-adds
    assert r.subnormal_inputs == "preserve" and r.subnormal_outputs == "preserve"
    assert r.promotion_interval is None


def test_numpy_sum_is_pairwise_over_eight_lanes():
    r = fingerprint(lambda x: np.sum(x, axis=-1), op="sum", dtype="float32")
    assert (r.accumulator_bits, r.accumulator_rounding, r.fused_group) == (24, "nearest", 1)
    assert r.reduction_order.startswith("8 interleaved partial sums")


def _torch_call(fn, dtype):
    import ml_dtypes
    import torch

    def call(a, b):
        if dtype == "bfloat16":
            ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
            tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16)
            return fn(ta, tb).view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return fn(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    return call


def test_torch_cpu_fp32_and_bf16():
    torch = pytest.importorskip("torch")
    r32 = fingerprint(_torch_call(torch.matmul, "float32"), op="matmul", dtype="float32")
    assert (r32.operand_format, r32.accumulator_bits, r32.accumulator_rounding) == (
        "float32", 24, "nearest")
    rbf = fingerprint(_torch_call(torch.matmul, "bfloat16"), op="matmul", dtype="bfloat16")
    assert rbf.output_format == "bfloat16"
    # bf16 operands, an fp32 accumulator (24 bits seen through cancellation), one rounding out
    assert (rbf.operand_format, rbf.accumulator_bits, rbf.accumulator_rounding) == (
        "bfloat16", 24, "nearest")


def test_torch_medium_precision_operands():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.dirname(KERNELS))
    try:
        from fingerprint_designs import torch_matmul_medium
    finally:
        sys.path.pop(0)
    r = fingerprint(_torch_call(torch_matmul_medium, "float32"), op="matmul", dtype="float32")
    # 'medium' lets torch round fp32 operands to bf16 where its CPU backend does so (which
    # depends on the CPU and the torch version): ask it directly, with one product of an
    # operand that needs 11 bits (1 + 2**-10 comes out as 1 from bf16 operands)
    x = torch.full((32, 32), 1 + 2.0 ** -10)
    rounds = torch_matmul_medium(x, torch.eye(32))[0, 0].item() == 1.0
    assert r.operand_format == ("bfloat16" if rounds else "float32")
    assert r.accumulator_bits == 24


# -- isolation, the CLI and failures ---------------------------------------------------------

def _cli(*args):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", "import sys; from kcontract.cli import main; "
                           "sys.exit(main())", *args],
                          capture_output=True, text=True, env=env, timeout=300)


def test_cli_fingerprints_a_narrow_accumulator_in_its_worker(tmp_path):
    out = tmp_path / "fp.json"
    svg = tmp_path / "fp.svg"
    res = _cli("fingerprint", f"{KERNELS}:narrow14_matmul", "--op", "matmul", "--dtype",
               "float32", "--json", str(out), "--plot", str(svg))
    assert res.returncode == 0, res.stderr
    assert "accumulator bits" in res.stdout and "toward_zero" in res.stdout
    data = json.loads(out.read_text())
    rec = data["recipe"]
    assert rec["accumulator_bits"]["value"] == 14
    assert rec["accumulator_rounding"]["value"] == "toward_zero"
    assert rec["fused_group"]["value"] == 1
    assert rec["promotion_interval"]["value"] is None
    assert data["sweep"][-1]["bitwise"] == 1.0
    assert svg.read_text().lstrip().startswith("<?xml") and "measured" in svg.read_text()


def test_a_crashing_kernel_is_reported_not_fingerprinted():
    with pytest.raises(ProbeFailure, match="crashed"):
        fingerprint(f"{KERNELS}:crashing", op="matmul", dtype="float32")
    res = _cli("fingerprint", f"{KERNELS}:crashing", "--op", "matmul", "--dtype", "float32")
    assert res.returncode == 1 and "crashed" in res.stderr


def test_an_op_without_probes_is_a_usage_error():
    with pytest.raises(UsageError, match="no probes for op 'softmax'"):
        fingerprint(lambda x: x, op="softmax", dtype="float32")
    res = _cli("fingerprint", f"{KERNELS}:numpy_matmul", "--op", "softmax", "--dtype", "float32")
    assert res.returncode == 2 and "no probes for op 'softmax'" in res.stderr
