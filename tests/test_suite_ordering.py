"""The ordering and determinism family (C-ORD-01..03): calibration, protocols, signatures."""
from __future__ import annotations

import itertools
import textwrap

import numpy as np
import pytest

from kcontract.check.runner import check
from kcontract.classes.ordering import arrangements, diff_pattern, schedules
from kcontract.language.loader import load_contracts
from kcontract.suite import CONTRACTS_DIR

import newops_contracts
from suite_helpers import assert_soundly_calibrated, run_one

ORD_IDS = sorted(p.stem for p in CONTRACTS_DIR.glob("ord*.yaml"))
HERE = __file__
SUITE = "kcontract.suite.kernels"


def contract(cid: str):
    return load_contracts(str(CONTRACTS_DIR / f"{cid}.yaml"))[0]


def test_the_family_is_complete():
    every = ("matmul", "sum", "softmax", "layernorm", "attention", "embedding", "gelu",
             "linear_gelu", "cast")
    expected = ({"ord01-sum", "ord01-matmul"} | {f"ord02-{op}" for op in every}
                | {f"ord03-{op}" for op in ("matmul", "sum", "softmax", "layernorm",
                                            "attention")})
    assert set(ORD_IDS) == expected | newops_contracts.ORD
    for cid in ORD_IDS:
        c = contract(cid)
        assert c.id == cid and c.cls == f"C-ORD-0{cid[4]}" and c.op == cid.split("-", 1)[1]
        assert c.signature.detector, f"{cid} names no detector"
        assert "tolerance" in c.description.lower()
    for cid in ORD_IDS:
        c = contract(cid)
        if c.cls == "C-ORD-02":
            assert dict(c.scope.requires) == {"deterministic": True}
            assert c.oracle == "self" and c.postcondition.source == "same_bits(out, first)"
        if c.cls == "C-ORD-03":
            assert dict(c.scope.requires) == {"batch_invariant": True}
            assert c.oracle == "self" and c.postcondition.source == "same_bits(out, alone)"


# -- three-state calibration ---------------------------------------------------------------

@pytest.mark.parametrize("cid", ORD_IDS)
def test_calibration_is_sound(cid):
    assert_soundly_calibrated(cid)


# -- purpose-built kernels (loaded from this file by the checker) ---------------------------

_CALLS = itertools.count()


def splitk_rows(a, b):
    """Split-K GEMM (4 K-slices) accumulated per tile of 8 rows; on every call a random
    half of the tiles receive their slices in reverse order, as racing atomics would."""
    rng = np.random.default_rng(next(_CALLS))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    K, M = a.shape[-1], a.shape[-2]
    parts = [a32[:, k:k + K // 4] @ b32[k:k + K // 4] for k in range(0, K, K // 4)]
    out = np.zeros((M, b.shape[-1]), np.float32)
    for t in range(0, M, 8):
        order = parts[::-1] if rng.random() < 0.5 else parts
        for p in order:
            out[t:t + 8] += p[t:t + 8]
    return out.astype(a.dtype)


def split_when_batched(x):
    """Row sums that split each row in two blocks (a third and two thirds) only in batches
    of 16 rows or more."""
    x32 = x.astype(np.float32)
    if x.shape[0] >= 16:
        h = x.shape[-1] // 3
        return (np.sum(x32[:, :h], -1, dtype=np.float32)
                + np.sum(x32[:, h:], -1, dtype=np.float32)).astype(x.dtype)
    return np.sum(x32, -1, dtype=np.float32).astype(x.dtype)


def biased_sum(x):
    """A fixed-order sum scaled by (1 + 2^-10): every order is equally wrong."""
    return (np.sum(x, -1, dtype=np.float32) * np.float32(1 + 2.0 ** -10)).astype(x.dtype)


def torch_matmul(a, b):
    import torch
    return torch.matmul(a, b)


# -- C-ORD-01: the spread against the bound -------------------------------------------------

def test_spread_across_orders_is_reported_against_the_bound():
    res = run_one("ord01-sum", f"{SUITE}.ord01_sum:bad")
    sig = res.signature
    assert res.verdict.value == "violation"
    assert sig["finding"] == "spread" and sig["orders"] == 4
    assert sig["spread_ratio"] > 2 and sig["max_spread"] > sig["spread_bound"] > 0
    assert "2x the order-independent bound" in res.message
    assert f"{sig['spread_ratio']:.3g}x" in res.message


def test_an_order_independent_error_is_told_from_a_spread():
    res = run_one("ord01-sum", f"{HERE}:biased_sum")
    assert res.verdict.value == "violation"
    assert res.signature["finding"] == "distance"
    assert res.signature["spread_ratio"] <= 1 < res.signature["error_ratio"]
    assert "systematic" in res.message


def test_schedules_permute_the_reduction_index():
    rng = np.random.default_rng(0)
    orders = schedules(6, 4, rng)
    assert [lbl for lbl, _ in orders] == ["identity", "reversed", "random1", "random2"]
    for _, p in orders:
        assert sorted(p.tolist()) == list(range(6))
    assert len(schedules(1, 4, rng)) == 1


def test_reorder_skips_an_op_without_the_reorder_capability(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(textwrap.dedent("""\
        id: my-gelu-orders
        class: C-ORD-01
        scope: {op: gelu, dtypes: [float32]}
        tolerance: {tol: ulp(ref)}
        postcondition: abs(out - ref) <= tol
        oracle: fp64
        protocol: {kind: reorder}
        signature: {code: x, summary: x}
        """))
    c = load_contracts(str(f))[0]
    run = check(f"{SUITE}.ord02_gelu:good", op="gelu", dtype="float32", contracts=[c],
                in_process=True)
    (res,) = run.results
    assert res.verdict.value == "skipped"
    assert "does not declare the capability 'reorder'" in res.message


# -- C-ORD-02: the pattern of run-to-run differences ------------------------------------------

def test_split_k_atomics_show_the_row_pattern():
    res = run_one("ord02-matmul", f"{HERE}:splitk_rows")
    sig = res.signature
    assert res.verdict.value == "violation"
    assert sig["pattern"] == "rows", res.message
    assert 0 < sig["rows_affected"] < sig["rows"] == 64
    assert sig["rows_affected"] % 8 == 0  # whole tiles of 8 rows
    assert sig["depth"] == "rounding"  # the same values, summed in another order
    assert "split-K / atomics-like row pattern" in res.message


def test_path_dependent_elementwise_differences_are_scattered():
    res = run_one("ord02-gelu", f"{SUITE}.ord02_gelu:bad")
    assert res.verdict.value == "violation"
    assert res.signature["pattern"] == "scattered"
    assert res.signature["depth"] == "rounding"


def test_changed_data_is_told_from_reordering():
    res = run_one("ord02-embedding", f"{SUITE}.ord02_embedding:bad")
    assert res.signature["depth"] == "data"
    assert res.signature["distinct_results"] == 2  # cold cache, then warm
    assert res.signature["runs_differing"] == [2, 3, 4]
    assert "the data itself changed" in res.message


def test_diff_pattern():
    m = np.zeros((16, 32), bool)
    assert diff_pattern(m)["pattern"] == "none"
    m[[2, 3, 9]] = True
    m[2, :5] = False
    p = diff_pattern(m)
    assert p["pattern"] == "rows" and p["rows_affected"] == 3
    assert diff_pattern(m.T)["pattern"] == "columns"
    assert diff_pattern(np.ones((4, 4), bool))["pattern"] == "everything"
    one_d = np.zeros(10, bool)
    one_d[[1, 4]] = True
    assert diff_pattern(one_d)["pattern"] == "rows"
    rng = np.random.default_rng(1)
    assert diff_pattern(rng.random((16, 512)) < 0.01)["pattern"] == "scattered"
    # dense random differences leave a few columns untouched by chance: not "columns"
    assert diff_pattern(rng.random((16, 512)) < 0.3)["pattern"] == "dense"


def test_a_deterministic_torch_kernel_conforms():
    pytest.importorskip("torch")
    res = run_one("ord02-matmul", f"{HERE}:torch_matmul", framework="torch")
    assert res.verdict.value == "pass", res.message


def test_determinism_applies_only_when_declared():
    res = run_one("ord02-sum", f"{SUITE}.ord02_sum:bad", declare={"deterministic": "false"})
    assert res.verdict.value == "skipped" and "deterministic=True" in res.message


# -- C-ORD-03: batch dependence ---------------------------------------------------------------

def test_batch_dependence_names_the_batch_sizes():
    res = run_one("ord03-sum", f"{HERE}:split_when_batched", declare={"batch_invariant": "true"})
    sig = res.signature
    assert res.verdict.value == "violation"
    assert sig["batch_sizes"] == [16, 64] and sig["agreeing_sizes"] == [3]
    assert sig["nondeterministic"] is False
    assert "in batches of 16 and 64" in res.message and "batches of 3" in res.message


def test_split_k_by_rows_names_the_sizes_that_change_it():
    res = run_one("ord03-matmul", f"{SUITE}.ord03_matmul:bad",
                  declare={"batch_invariant": "true"})
    assert res.signature["batch_sizes"] == [16, 64]
    assert res.signature["agreeing_sizes"] == [3]
    assert res.signature["rows_affected"] == res.signature["rows_probed"] == 8


def test_run_to_run_noise_is_not_blamed_on_the_batch_alone():
    res = run_one("ord03-sum", f"{SUITE}.ord02_sum:bad", declare={"batch_invariant": "true"})
    assert res.verdict.value == "violation"
    assert res.signature["nondeterministic"] is True
    assert "C-ORD-02" in res.message


def test_batch_invariance_applies_only_when_declared():
    res = run_one("ord03-sum", f"{SUITE}.ord03_sum:bad")
    assert res.verdict.value == "skipped" and "batch_invariant=True" in res.message


def test_arrangements_cover_every_probe_in_batches_of_the_size():
    rng = np.random.default_rng(3)
    probe, others = [1, 5, 9, 12], [0, 2, 3, 4, 6, 7, 8, 10, 11, 13, 14, 15]
    for size in (3, 8, 16):
        arr = arrangements(probe, others, size, rng)
        assert set(arr) == {"A", "B"}
        for batches in arr.values():
            seen = [r for rows in batches for r in rows if r in probe]
            assert sorted(seen) == probe
            for rows in batches:
                assert len(rows) == size and len(set(rows)) == size
        assert arr["A"] != arr["B"]


def test_a_reloaded_handle_reloads_its_second_worker_and_still_catches_the_hash_seed():
    """Calibration reloads one handle kernel after kernel: the second worker C-ORD-02
    compares against is reloaded with it (one process start, not one per kernel), stays a
    process of its own with its own hash seed, and a kernel whose summation order follows
    the hash seed is still told apart across the two."""
    from pathlib import Path
    from kcontract.check.sandbox import KernelProcess
    seeded = Path(HERE).parent / "adversarial" / "f8_hash_seed_order.py"
    c = contract("ord02-matmul")
    h = KernelProcess(f"{SUITE}.ord02_matmul:good", decoys=False, timeout=60)
    h.start()
    try:
        run = check(h.kernel, op="matmul", dtype="float32", contracts=[c], handle=h)
        assert run.results[0].verdict.value == "pass"
        sibling = h.sibling()
        pid = sibling.proc.pid
        assert pid != h.proc.pid
        h.reload(f"{seeded}:kernel")
        run = check(h.kernel, op="matmul", dtype="float32", contracts=[c], handle=h)
        assert run.results[0].verdict.value == "violation", run.results[0].message
        assert h.sibling() is sibling and sibling.proc.pid == pid  # reloaded, not restarted
        assert sibling.kernel == h.kernel
    finally:
        h.close()
