"""The guard's check of one F.linear product (Guard.check_linear): the compiled common
case for a cached weight projection (float32 and bfloat16 CPU tensors) decides exactly as
verify does, catches a wrong element through the general path, and never reuses a
projection or a bias product after the weight or the bias changed."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kcontract.freivalds import ProductCheckError, guard, verify  # noqa: E402
from kcontract.freivalds import _core  # noqa: E402
from kcontract.freivalds._guard import Guard  # noqa: E402

F = torch.nn.functional


#: the tests of the compiled paths (the lean linear check, the remembered one): without
#: the compiled helper every check goes through verify, which the other tests cover
needs_helper = pytest.mark.skipif(getattr(_core._fastc, "lean", None) is None,
                                  reason="without the compiled helper")


def layer(M, K, N, dtype, bias, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = torch.nn.Parameter((torch.randn(N, K, generator=g) / K ** 0.5).to(dtype),
                           requires_grad=False)
    b = torch.nn.Parameter(torch.randn(N, generator=g).to(dtype), requires_grad=False) \
        if bias else None
    x = torch.randn(M, K, generator=g).to(dtype)
    return x, w, b


def product(x, w, b):
    """The honest product: float32 accumulation, rounded to the operands' format."""
    out = F.linear(x.float(), w.float(), None if b is None else b.float())
    return out.to(x.dtype)


def counting(monkeypatch):
    seen = []
    real = _core._fast
    monkeypatch.setattr(_core, "_fast", lambda *a, **k: seen.append(1) or real(*a, **k))
    return seen


@needs_helper
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("M", [1, 16, 300])
def test_a_cached_linear_check_takes_the_compiled_path_and_passes(monkeypatch, dtype, bias,
                                                                    M):
    x, w, b = layer(M, 512, 384, dtype, bias, M)
    out = product(x, w, b)
    seen = counting(monkeypatch)
    g = Guard(seed=2)
    for _ in range(5):
        g.check_linear(x, w, out, b)
    assert g.checked == 5 and g.failed == 0 and g.stats.calls == 5
    assert len(seen) == 1  # only the first check (which fills the cache) ran verify
    assert g.stats.cache_hits == 4 and g.stats.by_op["linear"][0] == 5
    res = g.last_result
    assert res.passed and res.shape == ((), M, 512, 384) and 0.0 <= res.ratio <= 1.0


@needs_helper
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [False, True])
def test_the_compiled_linear_check_decides_as_verify(dtype, bias):
    """Its screen ratio is the one verify computes with the same seed and projection."""
    x, w, b = layer(64, 1024, 256, dtype, bias, 7)
    out = product(x, w, b)
    g = Guard(seed=5)
    g.check_linear(x, w, out, b)
    for _ in range(6):
        g.check_linear(x, w, out, b)
        ratio, seed, _, _ = g._last
        ref = verify(x, w.T, out, bias=b, seed=seed, false_alarm=g.false_alarm,
                     _pre=g._pre_for(w, True))
        assert ref.passed and ref.screen_ratio == ratio


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("M", [1, 16, 256])
def test_one_wrong_element_is_caught_every_time(dtype, bias, M):
    """An element off by twice the screen's threshold (what verify reports for the honest
    product; for float32 at M = 256 that is below 1e-4 max |C|), or by 1e-4 max |C| where
    that is more (the float64 element test decides, and its bound does not shrink with the
    screen's: a quiet summation order calibrates a lower threshold), anywhere: the compiled
    check hands the call to verify, which finds the element."""
    x, w, b = layer(M, 2048, 1024, dtype, bias, 11)
    out = product(x, w, b)
    thr = float(np.max(verify(x, w.T, out, bias=b, seed=1).threshold))
    big = 1e-4 * float(out.abs().max())
    if M == 256 and dtype is torch.float32:
        assert 2 * thr < big
    err = max(2 * thr, big)
    g = Guard(seed=9)
    g.check_linear(x, w, out, b)  # fills the cache
    rng = np.random.default_rng(M)
    for _ in range(8):
        i, j = int(rng.integers(M)), int(rng.integers(1024))
        bad = out.clone()
        bad[i, j] += err * (1 if rng.random() < 0.5 else -1)
        with pytest.raises(ProductCheckError) as ei:
            g.check_linear(x, w, bad, b)
        assert (i, j) in ei.value.result.suspect_elements


def unequal_rows(bias):
    """A float32 layer whose first 16 input rows are 30 times the others (as an attention
    output's first positions, or a batch of unequal inputs): the screen, calibrated on the
    typical row, does not clear the big rows; their own noise does."""
    x, w, b = layer(256, 512, 384, torch.float32, bias, 3)
    with torch.no_grad():
        x[:16] *= 30.0
    return x, w, b


@needs_helper
@pytest.mark.parametrize("bias", [False, True])
def test_rows_of_unequal_norms_pass_in_the_compiled_second_look(monkeypatch, bias):
    x, w, b = unequal_rows(bias)
    out = product(x, w, b)
    seen = counting(monkeypatch)
    g = Guard(seed=2)
    for _ in range(4):
        g.check_linear(x, w, out, b)
    assert g.checked == 4 and g.failed == 0
    assert len(seen) == 1  # the first check fills the cache; the others stay compiled
    ratio, seed, _, _ = g._last
    monkeypatch.undo()
    ref = verify(x, w.T, out, bias=b, seed=seed, _pre=g._pre_for(w, True))
    assert ref.passed and ref.screen_ratio > 1.0 and not ref.screened_rows
    assert ratio == pytest.approx(ref.ratio, rel=1e-6)  # the general path's per-row look


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("row", [3, 100])
def test_the_second_look_still_catches_a_wrong_element(bias, row):
    """1e-4 max |C| off, in a big row (whose own noise is the larger) or a typical one."""
    x, w, b = unequal_rows(bias)
    out = product(x, w, b)
    g = Guard(seed=4)
    g.check_linear(x, w, out, b)
    g.check_linear(x, w, out, b)
    assert g.failed == 0
    rng = np.random.default_rng(row)
    for _ in range(4):
        j = int(rng.integers(384))
        bad = out.clone()
        bad[row, j] += 1e-4 * float(out.abs().max())
        with pytest.raises(ProductCheckError) as ei:
            g.check_linear(x, w, bad, b)
        assert (row, j) in ei.value.result.suspect_elements


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_an_updated_weight_or_bias_is_never_checked_against_its_old_projection(dtype):
    x, w, b = layer(32, 512, 256, dtype, True, 3)
    with torch.no_grad():
        g = Guard(seed=1, on_fail="log")
        old = product(x, w, b)
        g.check_linear(x, w, old, b)
        g.check_linear(x, w, old, b)
        assert g.failed == 0
        w.mul_(1.5)  # in place: the cached W^T r is stale
        g.check_linear(x, w, old, b)  # the old product is now wrong
        assert g.failed == 1
        g.check_linear(x, w, product(x, w, b), b)
        b.add_(0.25)  # in place: the cached b . r is stale
        g.check_linear(x, w, product(x, w, b) - 0.25 if dtype is torch.float32 else
                       (product(x, w, b).float() - 0.25).to(dtype), b)
        assert g.failed == 2
        g.check_linear(x, w, product(x, w, b), b)
        assert g.failed == 2 and g.checked == 6


@needs_helper
def test_the_mode_checks_nn_linear_through_check_linear(monkeypatch):
    lin = torch.nn.Linear(256, 128)
    x = torch.randn(4, 10, 256)
    seen = counting(monkeypatch)
    with torch.no_grad(), guard(seed=4) as g:
        for _ in range(4):
            lin(x)
    assert g.checked == 4 and g.failed == 0 and g.stats.cache_hits == 3 and len(seen) == 1


def test_other_cases_go_through_verify(monkeypatch):
    """float64, non-contiguous x, a weight never seen: the general path."""
    seen = counting(monkeypatch)
    g = Guard(seed=6)
    x, w, _ = layer(8, 256, 128, torch.float64, False)
    out = F.linear(x, w)
    g.check_linear(x, w, out)
    g.check_linear(x, w, out)
    x32, w32, _ = layer(256, 96, 128, torch.float32, False)
    xt = x32.T.contiguous().T  # the same values, column-major
    g.check_linear(xt, w32, product(x32, w32, None))
    g.check_linear(xt, w32, product(x32, w32, None))
    assert g.checked == 4 and g.failed == 0 and len(seen) == 4


@pytest.mark.parametrize("K, N", [(32, 256), (256, 48)])
def test_a_layer_too_narrow_for_the_compiled_check_goes_through_verify_each_time(
        monkeypatch, K, N):
    """K or N below 64 (too short a sum for the screen's calibration from y = W^T r): every
    check is verify's, honest products pass and a wrong element is still caught."""
    seen = counting(monkeypatch)
    x, w, b = layer(40, K, N, torch.float32, True, 7)
    out = product(x, w, b)
    g = Guard(seed=9, on_fail="log")
    for _ in range(3):
        g.check_linear(x, w, out, b)
    assert g.checked == 3 and g.failed == 0 and len(seen) == 3
    bad = out.clone()
    bad[5, 7] += 1e-2 * bad.abs().max()
    g.check_linear(x, w, bad, b)
    assert g.failed == 1 and len(seen) == 4


# ---------------------------------------------------------------------------
# deferred checks (guard(defer=True))
# ---------------------------------------------------------------------------

def test_deferred_checks_run_when_the_block_ends(monkeypatch):
    lin = torch.nn.Linear(256, 128)
    x = torch.randn(3, 256)
    with torch.no_grad(), guard(seed=3, defer=True) as g:
        for _ in range(5):
            lin(x)
        assert g.checked == 0 and len(g._pending) == 5  # recorded, not yet checked
    assert g.checked == 5 and g.failed == 0 and not g._pending
    assert g.stats.cache_hits == 4


def test_a_deferred_wrong_product_raises_at_the_end_and_the_others_are_checked():
    x, w, b = layer(4, 512, 256, torch.float32, True, 21)
    good = product(x, w, b)
    bad = good.clone()
    bad[2, 17] += 1e-2 * float(good.abs().max())
    g = Guard(seed=4, defer=True)
    for out in (good, bad, good, good):
        g.check_linear(x, w, out, b)
    assert g.checked == 0
    with pytest.raises(ProductCheckError) as ei:
        g.flush()
    assert (2, 17) in ei.value.result.suspect_elements
    assert g.checked == 4 and g.failed == 1 and not g._pending


def test_a_product_changed_in_place_before_its_deferred_check_is_skipped():
    """Not a false alarm: an output (or input, weight, bias) modified after the product
    is no longer what the product made."""
    x, w, b = layer(8, 256, 128, torch.float32, True, 22)
    g = Guard(seed=5, defer=True)
    outs = [product(x, w, b) for _ in range(4)]
    for out in outs:
        g.check_linear(x, w, out, b)
    outs[1].relu_()  # an in-place activation on the product's output
    g.flush()
    assert g.stats.skipped == 1 and g.checked == 3 and g.failed == 0
    g.check_linear(x, w, product(x, w, b), b)
    with torch.no_grad():
        w.mul_(2.0)  # the weight changed after the product: skipped too
    g.flush()
    assert g.stats.skipped == 2 and g.checked == 3


def test_deferral_holds_a_bounded_number_of_bytes():
    x, w, _ = layer(64, 256, 128, torch.float32, False, 23)
    out = product(x, w, None)
    size = x.nbytes + out.nbytes
    g = Guard(seed=6, defer=True, defer_bytes=2 * size)
    for _ in range(5):
        g.check_linear(x, w, out)
    assert len(g._pending) == 2 and g.checked == 3  # the rest checked at once
    g.flush()
    assert g.checked == 5 and g.failed == 0


def test_a_large_product_is_checked_at_once_by_a_deferring_guard():
    """Products whose input and output take more than DEFER_PRODUCT_BYTES are checked
    right after them (their operands still in the caches); smaller ones are deferred."""
    from kcontract.freivalds._guard import DEFER_PRODUCT_BYTES

    big = layer(DEFER_PRODUCT_BYTES // (4 * (256 + 128)) + 1, 256, 128, torch.float32,
                False, 24)
    small = layer(16, 256, 128, torch.float32, False, 25)
    g = Guard(seed=7, defer=True)
    for x, w, _ in (big, small, big):
        out = product(x, w, None)
        assert (x.nbytes + out.nbytes > DEFER_PRODUCT_BYTES) == (x is big[0])
        g.check_linear(x, w, out)
    assert len(g._pending) == 1 and g.checked == 2
    g.flush()
    assert g.checked == 3 and g.failed == 0


def test_a_failing_block_drops_its_deferred_checks():
    lin = torch.nn.Linear(128, 64)
    with pytest.raises(ValueError):
        with torch.no_grad(), guard(defer=True) as g:
            lin(torch.randn(2, 128))
            raise ValueError("the guarded code failed")
    assert g.checked == 0 and g.stats.skipped == 1 and not g._pending


def test_inference_tensors_are_checked_at_once_not_deferred():
    """They have no version counter, so a later in-place change could not be seen."""
    lin = torch.nn.Linear(128, 64)
    with torch.inference_mode(), guard(defer=True) as g:
        out = lin(torch.randn(3, 128))
        assert g.checked == 1 and not g._pending
        out.relu_()  # would have been a false alarm for a deferred check
    assert g.checked == 1 and g.failed == 0


def test_a_deferred_failure_raises_when_the_block_ends():
    x, w, b = layer(4, 512, 256, torch.float32, True, 24)
    good = product(x, w, b)  # made outside the block: the guard would check it too
    bad = good.clone()
    bad[1, 3] += 1e-2 * float(bad.abs().max())
    with pytest.raises(ProductCheckError) as ei:
        with guard(seed=7, defer=True) as g:
            g.check_linear(x, w, good, b)
            g.check_linear(x, w, bad, b)
            assert g.checked == 0  # nothing checked inside the block
    assert (1, 3) in ei.value.result.suspect_elements and g.checked == 2 and g.failed == 1


def test_an_inference_tensor_bias_goes_through_verify():
    x, w, _ = layer(8, 256, 128, torch.float32, False, 25)
    with torch.inference_mode():
        b = torch.randn(128)
        out = F.linear(x, w, b)
    g = Guard(seed=8)
    for _ in range(3):
        g.check_linear(x, w, out, b)
    assert g.checked == 3 and g.failed == 0 and g.stats.errors == 0
    bad = out.clone()
    bad[0, 0] += 1.0
    with pytest.raises(ProductCheckError):
        g.check_linear(x, w, bad, b)


def _swap_that_cancels(g, x, w, out):
    """out with two columns swapped whose signs in the guard's cached projection agree
    (their swap leaves C r as it was, up to the order of the sum)."""
    r = next(iter(g._cache.entries.values()))[2].r
    j = 1 + int(np.flatnonzero(r[1:] == r[0])[0])
    bad = out.clone()
    bad[:, [0, j]] = out[:, [j, 0]]
    return bad


@pytest.mark.parametrize("refresh", [None, 4])
def test_signs_are_drawn_anew_so_a_cancelling_fault_is_not_missed_for_good(refresh):
    """A fault that cancels under one draw of signs (two swapped columns of equal sign)
    passes every check while the guard keeps its signs, and is caught once it draws new
    ones (every `refresh` checks from cached projections)."""
    x, w, _ = layer(32, 128, 96, torch.float32, False, 5)
    out = product(x, w, None)
    g = Guard(seed=3, on_fail="log", refresh=refresh)
    g.check_linear(x, w, out)  # fills the cache
    bad = _swap_that_cancels(g, x, w, out)
    r0 = next(iter(g._cache.entries.values()))[2].r.copy()
    for _ in range(40):
        g.check_linear(x, w, bad)
    if refresh is None:
        assert g.failed == 0  # the same signs for the guard's life: never seen
        assert np.array_equal(next(iter(g._cache.entries.values()))[2].r, r0)
    else:
        assert 0 < g.failed < 40 and g.stats.errors == 0
    g2 = Guard(seed=3, on_fail="log", refresh=refresh)
    for _ in range(41):
        g2.check_linear(x, w, out)
    assert g2.failed == 0 and g2.checked == 41  # honest products pass across the draws


@pytest.mark.parametrize("refresh", [0, -1, 2.5, True])
def test_a_bad_refresh_is_a_usage_error(refresh):
    from kcontract.errors import UsageError

    with pytest.raises(UsageError, match="refresh must be None or a positive integer"):
        Guard(refresh=refresh)


@needs_helper
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_honest_products_with_a_bias_pass_across_draws_of_the_signs(monkeypatch, dtype):
    """After each draw the weight's projection and the bias's b . r are made anew once
    (through verify), and the checks after it take the compiled path again."""
    x, w, b = layer(24, 128, 96, dtype, True, 6)
    out = product(x, w, b)
    seen = counting(monkeypatch)
    g = Guard(seed=4, on_fail="log", refresh=3)
    for _ in range(20):
        g.check_linear(x, w, out, b)
    assert g.failed == 0 and g.checked == 20 and g.stats.cache_hits == 15
    assert len(seen) == 5  # the first check and one after each of the 4 draws


@needs_helper
@pytest.mark.parametrize("write", ["data", "numpy", "data swap"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_weight_written_behind_its_version_counter_gets_a_new_projection(write, dtype):
    """Writes through .data or a numpy view keep the version counter: the sampled
    elements' bytes show them, so the product with the old weight fails and the product
    with the new one passes (an honest training step that updates .data)."""
    x, w, _ = layer(32, 256, 128, dtype, False, 8)
    old = w.detach().clone()
    g = Guard(seed=5, on_fail="log")
    g.check_linear(x, w, product(x, w, None))
    g.check_linear(x, w, product(x, w, None))  # (the compiled path, from the cache)
    version = w._version
    if write == "data":
        w.data.mul_(1.5)
    elif write == "numpy":
        w.data.view(torch.int16).numpy()[:] = (w.detach() * 1.5).view(torch.int16).numpy()
    else:
        w.data = w.data * 1.5
    assert w._version == version and not torch.equal(w.detach(), old)
    g.check_linear(x, w, product(x, old, None))  # a kernel that kept the old weight
    assert g.failed == 1
    g.check_linear(x, w, product(x, w, None))
    g.check_linear(x, w, product(x, w, None))
    assert g.failed == 1 and g.checked == 5


def test_a_bias_written_through_data_is_not_checked_with_its_old_product():
    x, w, b = layer(32, 256, 128, torch.float32, True, 9)
    old = b.detach().clone()
    g = Guard(seed=6, on_fail="log")
    for _ in range(2):
        g.check_linear(x, w, product(x, w, b), b)
    b.data.add_(0.5)
    g.check_linear(x, w, product(x, w, old), b)  # a kernel that kept the old bias
    g.check_linear(x, w, product(x, w, b), b)
    assert g.failed == 1 and g.checked == 4


# --- the lean check for a weight, a bias and shapes it has passed with before -----------

from kcontract.freivalds import _guard, _tensorguards  # noqa: E402


def counting_lean(monkeypatch):
    """The calls of the lean check that reads each tensor property by itself."""
    seen = []
    real = Guard._lean_linear
    monkeypatch.setattr(Guard, "_lean_linear",
                        lambda self, *a: seen.append(1) or real(self, *a))
    return seen


needs_guards = pytest.mark.skipif(not _tensorguards.tensor_guards(),
                                  reason="torch without a usable TensorGuards")


@needs_helper
@needs_guards
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [False, True])
def test_repeated_checks_take_the_path_without_property_reads(monkeypatch, dtype, bias):
    x, w, b = layer(16, 512, 384, dtype, bias, 4)
    out = product(x, w, b)
    lean, seen = counting_lean(monkeypatch), counting(monkeypatch)
    g = Guard(seed=3)
    for _ in range(6):
        g.check_linear(x, w, out, b)
    # the first check tries the property-reading lean check (nothing cached yet) and
    # verify fills the cache; the second passes that lean check, which remembers the
    # tensors; the other four repeat it from what it remembered
    assert len(seen) == 1 and len(lean) == 2
    assert g.checked == 6 and g.failed == 0 and g.stats.cache_hits == 5
    assert g.stats.by_op["linear"][0] == 6 and g.stats.seconds > 0
    ratio, seed, shape, name = g._last
    assert shape == (16, 512, 384) and name == str(dtype).split(".")[1]
    ref = verify(x, w.T, out, bias=b, seed=seed, false_alarm=g.false_alarm,
                 _pre=g._pre_for(w, True))
    assert ref.passed and ref.screen_ratio == ratio


@needs_helper
@needs_guards
@pytest.mark.parametrize("bias", [False, True])
def test_a_wrong_element_is_caught_after_the_path_is_taken(monkeypatch, bias):
    x, w, b = layer(16, 2048, 1024, torch.float32, bias, 12)
    out = product(x, w, b)
    g = Guard(seed=8)
    for _ in range(3):
        g.check_linear(x, w, out, b)
    assert id(w) in g._fast
    lean = counting_lean(monkeypatch)  # (a row beyond the screen: verify at once)
    # (twice what verify reports as the threshold, as in the test without the path)
    err = 2 * float(np.max(verify(x, w.T, out, bias=b, seed=1).threshold))
    rng = np.random.default_rng(5)
    for _ in range(6):
        i, j = int(rng.integers(16)), int(rng.integers(1024))
        bad = out.clone()
        bad[i, j] += err
        with pytest.raises(ProductCheckError) as ei:
            g.check_linear(x, w, bad, b)
        assert (i, j) in ei.value.result.suspect_elements
    g.check_linear(x, w, out, b)
    assert g.failed == 6 and g.checked == 10 and len(lean) == 0


@needs_guards
@pytest.mark.parametrize("case", ["neg", "strided", "subclass", "grad", "dtype", "shape",
                                  "other bias", "no bias"])
@needs_helper
def test_tensors_unlike_the_remembered_ones_are_read_anew(monkeypatch, case):
    """Each difference the remembered check must see sends the call back to the
    property-reading path (or verify), whose verdict stands: honest products pass, and a
    negated view of a product's memory (the values' negatives) fails."""
    x, w, b = layer(16, 256, 192, torch.float32, True, 6)
    out = product(x, w, b)
    g = Guard(seed=2, on_fail="log")
    for _ in range(3):
        g.check_linear(x, w, out, b)
    assert len(g._fast[id(w)].guards) == 1
    lean = counting_lean(monkeypatch)
    xx, bb, oo, want_fail = x, b, out, False
    if case == "neg":  # memory that holds out, values that are -out: a wrong product
        oo, want_fail = torch._neg_view(out), True
    elif case == "strided":
        oo = out.T.contiguous().T
    elif case == "subclass":
        class Sub(torch.Tensor):
            pass
        xx = x.as_subclass(Sub)
    elif case == "grad":
        xx = x.clone().requires_grad_(True)
    elif case == "dtype":
        xx, w2 = x.double(), w.double()
        g.check_linear(xx, w2, F.linear(xx, w2, b.double()), b.double())
        assert g.failed == 0 and len(lean) == 1  # (float64: declined there, verify)
        assert id(w2) not in g._fast
        return
    elif case == "shape":
        xx = torch.cat([x, x])
        oo = product(xx, w, b)
    elif case == "other bias":
        bb = b.detach().clone()
    elif case == "no bias":
        bb, oo = None, product(x, w, None)
    g.check_linear(xx, w, oo, bb)
    assert g.failed == int(want_fail) and g.checked == 4
    assert len(lean) == 1


@needs_helper
@needs_guards
def test_a_weight_keeps_the_path_for_its_latest_shapes(monkeypatch):
    x, w, _ = layer(64, 256, 192, torch.float32, False, 7)
    g = Guard(seed=1)
    lean = counting_lean(monkeypatch)
    rows = [1, 16, 64, 1, 16, 64, 1, 16, 64]
    for m in rows:
        g.check_linear(x[:m], w, product(x[:m], w, None))
    # the property-reading check for the first (declined: nothing cached; verify fills the
    # cache), once each for 16 and 64, again for 1; then three shapes are kept and the
    # rest repeat
    assert len(lean) == 4 and g.checked == len(rows) and g.failed == 0
    assert [m for _, m, _ in g._fast[id(w)].guards] == [1, 64, 16]
    g.check_linear(x[:8], w, product(x[:8], w, None))  # a fourth: the oldest goes
    assert [m for _, m, _ in g._fast[id(w)].guards] == [8, 1, 64] and len(lean) == 5


@needs_helper
@needs_guards
def test_new_signs_forget_the_remembered_checks():
    x, w, _ = layer(16, 256, 192, torch.float32, False, 2)
    out = product(x, w, None)
    g = Guard(seed=3, refresh=4)
    for _ in range(4):
        g.check_linear(x, w, out)
    assert id(w) in g._fast
    g.check_linear(x, w, out)  # the fourth cache hit: signs drawn anew
    assert id(w) not in g._fast and g.failed == 0


@needs_helper
@needs_guards
def test_the_lean_checks_tally_counts_as_each_check_would_and_keeps_the_refresh_points(
        monkeypatch):
    """The remembered lean checks are tallied and counted in stats when stats are read:
    the same counters (per op too: linear, and addmm's K x N weight; a cache hit for each
    check that did not make its projection anew) and the same draws of the signs whether
    stats are read after every check or only at the end."""
    x, w, _ = layer(16, 256, 192, torch.float32, False, 2)
    out = product(x, w, None)
    wt = w.detach().T.contiguous()  # a K x N weight: addmm's
    out_mm = x @ wt
    xs = x.T.contiguous().T  # the same values, not contiguous
    guards = [Guard(seed=7, refresh=5), Guard(seed=7, refresh=5)]
    draws = [[], []]
    made = []  # the projections each guard made (the checks that were no cache hit)
    real_get = _guard._WeightCache.get
    for k, g in enumerate(guards):
        seen = []

        def get(cache, src, transposed, N, cdtype, compute, seen=seen):
            return real_get(cache, src, transposed, N, cdtype,
                            lambda: seen.append(1) or compute())
        monkeypatch.setattr(_guard._WeightCache, "get", get)
        for i in range(23):
            if i % 3 == 2:
                g.check_linear(x, wt, out_mm, transposed=False)
            elif i % 4 == 3:  # (a strided x: a cache hit through verify, _cache_hit's)
                g.check_linear(xs, w, out)
            else:
                g.check_linear(x, w, out)
            if k == 0:
                g.stats  # (read: the tally counted at once)
                assert g._tally == [0, 0.0, 0, 0.0, 0]
            draws[k].append(g._refresh_at)
        made.append(len(seen))
        monkeypatch.undo()
    assert made[0] == made[1] >= 2 + 3  # (both weights' first checks, and after each draw)
    assert draws[0] == draws[1] and draws[0][-1] > 5  # (signs drawn anew, at the same checks)
    assert guards[1]._tally[4] > 0  # (the unread guard's tally holds checks)
    a, b = (g.stats.as_dict() for g in guards)
    for d in (a, b):
        d.pop("seconds")
        for op in d["by_op"].values():
            op.pop("seconds")
    assert a == b
    assert a["calls"] == a["checked"] == 23 and a["failed"] == 0
    assert a["cache_hits"] == 23 - made[0]
    assert a["by_op"]["linear"]["checked"] == 16 and a["by_op"]["addmm"]["checked"] == 7
    assert guards[1].stats.seconds > 0 and guards[1]._tally[4] == 0


@needs_helper
@needs_guards
@pytest.mark.parametrize("registered", [True, False])
def test_the_remembered_check_reads_versions_and_addresses_either_way(registered,
                                                                     monkeypatch):
    """The remembered check reads the weight's version counter and the tensors' addresses
    through torch's TensorBase descriptors where registered, through their names where
    not: the same checks either way -- honest products pass, an in-place update of one
    element of the weight is seen (a new projection), a fault is caught."""
    fastc = _core._fastc
    base = torch._C.TensorBase.__dict__
    with pytest.raises(TypeError):
        fastc.set_tensor_access(base["_version"], None)
    try:
        if not registered:
            fastc.set_tensor_access(None, None)
        x, w, _ = layer(8, 256, 192, torch.float32, False, 4)
        g = Guard(seed=6, on_fail="log")
        lean = counting_lean(monkeypatch)
        for _ in range(4):
            g.check_linear(x, w, product(x, w, None))
        assert id(w) in g._fast and g.failed == 0
        assert len(lean) == 2  # (the first two: the remembered check from the third on)
        sampled = set(np.frombuffer(g._fast[id(w)].offsets, np.int64) // 4)
        i = next(i for i in range(w.numel()) if i not in sampled)
        with torch.no_grad():  # (one element the fingerprint does not sample: the version
            w.view(-1)[i] += 1.0  # counter alone shows the update)
        g.check_linear(x, w, product(x, w, None))
        g.check_linear(x, w, product(x, w, None))
        # the remembered check saw the new version: the property-reading check ran for
        # both (a stale projection would fail and send each to verify, which makes it anew)
        assert len(lean) == 4
        bad = product(x, w, None)
        bad[2, 5] += 1e-3 * float(bad.abs().max())
        g.check_linear(x, w, bad)
        assert g.checked == 7 and g.failed == 1
    finally:
        fastc.set_tensor_access(base["_version"], base["data_ptr"], torch.Tensor)


def test_without_tensor_guards_the_checks_read_each_property(monkeypatch):
    monkeypatch.setattr(_tensorguards, "_TG", False)
    x, w, b = layer(16, 256, 192, torch.float32, True, 6)
    out = product(x, w, b)
    lean = counting_lean(monkeypatch)
    g = Guard(seed=2)
    for _ in range(4):
        g.check_linear(x, w, out, b)
    assert g._fast == {} and len(lean) == 4 and g.checked == 4 and g.failed == 0
    bad = out.clone()
    bad[3, 7] += 1e-3 * float(out.abs().max())
    with pytest.raises(ProductCheckError):
        g.check_linear(x, w, bad, b)


class _Blind:
    """A stand-in for TensorGuards that sees only sizes (it would take a negated or
    transposed view, another dtype or type for the tensor it was made from)."""

    def __init__(self, *ts, dynamic_dims_sizes, dynamic_dims_strides):
        self.sizes = dynamic_dims_sizes

    def check(self, *ts):
        return [list(t.shape) for t in ts] == self.sizes


class _Always(_Blind):
    def check(self, *ts):
        return True


@pytest.mark.parametrize("fake", [_Blind, _Always])
def test_a_tensor_check_that_misses_a_difference_is_refused(fake):
    assert not _tensorguards.sound(fake, torch)


@needs_guards
def test_torchs_tensor_check_passes_the_self_test():
    from torch._C._dynamo.guards import TensorGuards
    assert _tensorguards.sound(TensorGuards, torch)


@pytest.mark.parametrize("what", ["weight", "bias"])
def test_an_element_changed_in_place_is_seen_by_the_remembered_check(what):
    """One element changed in place (the version counter moves; the sampled bytes most
    likely do not): the product made before the change fails, the one after passes."""
    x, w, b = layer(16, 256, 192, torch.float32, True, 10)
    g = Guard(seed=4, on_fail="log")
    before = product(x, w, b)
    for _ in range(3):
        g.check_linear(x, w, before, b)
    with torch.no_grad():
        if what == "weight":
            w[5, 9] += 1.0 + abs(float(w[5, 9]))
        else:
            b[5] += 1.0 + abs(float(b[5]))
    g.check_linear(x, w, before, b)
    assert g.failed == 1
    g.check_linear(x, w, product(x, w, b), b)
    assert g.failed == 1 and g.checked == 5


@needs_helper
@needs_guards
def test_the_compiled_remembered_check_refuses_what_is_not_its_entry():
    lean = _guard._LEAN_C
    x, w, _ = layer(16, 256, 192, torch.float32, False, 2)
    out = product(x, w, None)
    g = Guard(seed=3)
    for _ in range(3):
        g.check_linear(x, w, out)
    ent = g._fast[id(w)]
    assert lean(g._fast, x, out, w, None, 7, 0.5)[:1] != (None,)
    assert lean({}, x, out, w, None, 7, 0.5) is None  # (no entry for this weight)
    assert lean({id(w): ent}, x, out, w.detach().clone(), None, 7, 0.5) is None
    with pytest.raises(TypeError):
        lean([], x, out, w, None, 7, 0.5)
    with pytest.raises(TypeError):
        lean({id(w): tuple(ent)[:-1]}, x, out, w, None, 7, 0.5)
    b = torch.zeros(192)
    assert lean(g._fast, x, out, w, b, 7, 0.5) is None  # (a bias it was not made with)
    ratio, seed, shape, name = lean(g._fast, x, out, w, None, 7, 0.5)
    assert seed == 7 and shape == (16, 256, 192) and name == "float32" and 0 <= ratio <= 1


@needs_helper
@needs_guards
def test_a_remembered_check_holds_no_activation():
    """The remembered TensorGuards keep the tensors' properties, not the tensors: x and
    out are freed once the caller drops them."""
    import gc
    import weakref
    x, w, _ = layer(16, 256, 192, torch.float32, False, 2)
    out = product(x, w, None)
    g = Guard(seed=3)
    for _ in range(3):
        g.check_linear(x, w, out)
    assert id(w) in g._fast
    refs = weakref.ref(x), weakref.ref(out)
    del x, out
    gc.collect()
    assert refs[0]() is None and refs[1]() is None


# --- addmm with a layer's K x N weight (GPT-2's Conv1D): check_linear(transposed=False) ----

@needs_helper
@needs_guards
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_addmm_layers_take_the_linear_checks_paths_and_catch_a_wrong_element(
        monkeypatch, dtype):
    """torch.addmm(bias, x, W) with a K x N weight parameter: the guard's linear paths
    (the lean check, then the remembered one) with the weight's projection W r, a square
    weight used both ways never checked with the other orientation's projection, and
    a wrong element caught on every path, at once and deferred."""
    x, wt, b = layer(48, 256, 256, dtype, True, 31)
    W = torch.nn.Parameter(wt.detach().T.contiguous(), requires_grad=False)  # K x N
    good = product(x, wt, b)  # x W + b, W = wt^T
    lean, seen = counting_lean(monkeypatch), counting(monkeypatch)
    with torch.no_grad(), guard(seed=5) as g:
        for _ in range(4):
            torch.addmm(b, x, W)
            torch.nn.functional.linear(x, W, b)  # the same square weight as N x K
    assert g.checked == 8 and g.failed == 0 and g.stats.skipped == 0
    assert id(W) in g._fast_mm and id(W) in g._fast  # one remembered check each way
    assert g.stats.by_op["addmm"][0] == 4 and g.stats.by_op["linear"][0] == 4
    assert len(lean) == 4 and len(seen) == 2  # (each way: the first check fills the
    # cache through verify, the second passes the lean check and remembers it, the others
    # repeat the remembered one -- none is handed to verify by the other way's)
    size = 1e-3 if dtype is torch.float32 else 0.25
    for defer in (False, True):
        for n in range(3):  # the general path, the lean one, the remembered one
            bad = good.clone()
            bad[7, 11] += size * float(good.abs().max())
            g = Guard(seed=9, on_fail="log", defer=defer)
            for _ in range(n):
                g.check_linear(x, W, good, b, transposed=False)
            g.check_linear(x, W, bad, b, transposed=False)
            g.flush()
            assert g.failed == 1 and g.checked == n + 1, (defer, n)
            assert g.last_result.suspect_elements == [(7, 11)]


# --- check_linear and _linear_now compiled (_fastc.GuardCore, the base of Guard) ----------

compiled_methods = pytest.mark.skipif(not hasattr(Guard, "_check_linear_py"),
                                      reason="without the compiled helper's methods")


def last(g):
    """What a guard knows of its last check, less the seconds it took."""
    r = g._last
    return r if isinstance(r, tuple) else (r.passed, r.seed, r.ratio, r.screen_ratio,
                                           r.shape, r.suspect_elements)


@compiled_methods
@needs_guards
@pytest.mark.parametrize("transposed", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_compiled_methods_keep_the_python_methods_books(transposed, dtype):
    """Two guards of one seed checking the same products, one through the compiled
    check_linear and one through the Python method it stands for: the same seeds drawn,
    the same last results, the same counts (checks, cache hits, per op), the signs drawn
    anew at the same check (refresh), and a wrong element caught by both."""
    x, w, b = layer(16, 512, 384, dtype, True, 21)
    W = w if transposed else torch.nn.Parameter(w.detach().T.contiguous(),
                                                requires_grad=False)
    good = product(x, w, b)
    guards = [Guard(seed=13, on_fail="log", refresh=5) for _ in range(2)]
    calls = [guards[0].check_linear, guards[1]._check_linear_py]
    assert type(calls[0]).__name__ == "builtin_function_or_method"
    for step in range(12):
        out = good
        if step == 9:
            out = good.clone()
            out[3, 7] += 0.25 * float(good.abs().max())
        for call in calls:
            call(x, W, out, b, transposed=transposed)
        a, p = guards
        assert a._seed_at == p._seed_at and last(a) == last(p), step
        assert (a.stats.checked, a.stats.failed, a.stats.cache_hits) \
            == (p.stats.checked, p.stats.failed, p.stats.cache_hits), step
        assert a._refresh_at == p._refresh_at, step
    op = "linear" if transposed else "addmm"
    for g in guards:
        assert g.checked == 12 and g.failed == 1 and g.stats.by_op[op][0] == 12
        assert g.stats.seconds > 0
    # the remembered check made most of them (counted in the tally, not by verify)
    assert guards[0].stats.cache_hits >= 8


@compiled_methods
def test_the_compiled_check_linear_hands_every_other_call_to_the_python_method(monkeypatch):
    """Keyword arguments, sampling, deferral, a guard without the weight cache and wrong
    calls go to the Python method, with the arguments as given (its errors, its
    behaviour); a guard's sample or defer changed after it was made is seen at the next
    call."""
    x, w, b = layer(4, 256, 128, torch.float32, True, 22)
    out = product(x, w, b)
    seen = []
    real = Guard._check_linear_py
    monkeypatch.setattr(Guard, "_check_linear_py",
                        lambda self, *a, **k: seen.append((a, k)) or real(self, *a, **k))
    g = Guard(seed=1, on_fail="log")
    g.check_linear(x, w, out, b)
    g.check_linear(x, w, out)  # (the bias left out: a failure, through the compiled call)
    assert seen == [] and g.checked == 2 and g.failed == 1
    g.check_linear(x, weight=w, out=out, bias=b)
    assert len(seen) == 1 and seen[0][1] == {"weight": w, "out": out, "bias": b}
    with pytest.raises(TypeError):
        g.check_linear(x, w)
    with pytest.raises(TypeError):
        g.check_linear(x, w, out, b, True)  # (transposed is keyword-only)
    with pytest.raises(TypeError):
        g.check_linear(x, w, out, b, transpose=True)
    assert len(seen) == 4
    g.sample = 0.0  # (every call sampled out)
    for _ in range(3):
        g.check_linear(x, w, out, b)
    assert len(seen) == 7 and g.stats.sampled_out == 3
    g.sample, g.defer = 1.0, True  # (recorded by the compiled call itself)
    g.check_linear(x, w, out, b)
    assert len(seen) == 7 and len(g._pending) == 1
    g.flush()
    g.defer = False
    n = g.checked
    g.check_linear(x, w, out, b)
    assert len(seen) == 7 and g.checked == n + 1
    nc = Guard(seed=1, cache_weights=False)
    for _ in range(2):
        nc.check_linear(x, w, out, b)
    assert len(seen) == 9 and nc.checked == 2 and nc.stats.cache_hits == 0
    with pytest.raises(TypeError):  # not a guard
        Guard.check_linear(object(), x, w, out)


@compiled_methods
def test_the_compiled_books_keep_what_the_python_books_keep():
    """GuardCore (the compiled base of Guard) and _GuardCorePy (the base without the
    helper): the same tally and the same point where fresh signs are due for one sequence of
    passing checks; the attributes read back as set (the last result, the room, the seed)."""
    core, py = Guard(seed=3, refresh=7), _guard._GuardCorePy()
    assert isinstance(core, _guard._GuardCore)
    py._tally_clear()
    for b in (core, py):
        b._lean_room = 5
    due = [[b._tally_add(i % 3 != 0, 0.25 * i) for i in range(1, 9)] for b in (core, py)]
    assert due[0] == due[1] == [False] * 4 + [True] + [False] * 3
    assert core._tally == py._tally == [6, 0.25 * (1 + 2 + 4 + 5 + 7 + 8), 2,
                                        0.25 * (3 + 6), 8]
    core._tally_clear()
    assert core._tally == [0, 0.0, 0, 0.0, 0]
    core._lean_room = None
    assert core._lean_room is None and not any(core._tally_add(True, 0.0)
                                               for _ in range(10))
    res = object()
    core._last = res
    assert core._last is res
    core._last = None
    assert core._last is None and core.last_result is None
    core._seed_at = 2 ** 62 - 1
    assert core._seed_at == 2 ** 62 - 1
    with pytest.raises(ValueError):
        core._seed_at = 2 ** 62
    with pytest.raises(TypeError):
        core._fast = []
    core.sample, core.defer, core.cache_weights = 0.5, 1, 0
    assert (core.sample, core.defer, core.cache_weights) == (0.5, True, False)


@compiled_methods
@needs_guards
def test_a_deferring_guards_products_take_the_compiled_call(monkeypatch):
    """A deferring guard's calls never reach the Python method: the compiled check_linear
    records a product of at most DEFER_PRODUCT_BYTES as the Python method does (the
    tensors and their version counters), checks a larger one at once (its sizes read off
    the tensors), and one beyond defer_bytes or of inference tensors at once; the flush
    checks what it recorded, skips a product changed in place since, and a wrong element
    is caught either way."""
    from kcontract.freivalds._guard import DEFER_PRODUCT_BYTES

    big = layer(DEFER_PRODUCT_BYTES // (4 * (256 + 128)) + 1, 256, 128, torch.float32,
                False, 28)
    small = layer(8, 256, 128, torch.float32, False, 29)
    seen = []
    real = Guard._check_linear_py
    monkeypatch.setattr(Guard, "_check_linear_py",
                        lambda self, *a, **k: seen.append(a[0]) or real(self, *a, **k))
    g = Guard(seed=4, defer=True, on_fail="log")
    for _ in range(3):
        for x, w, _ in (big, small):
            g.check_linear(x, w, product(x, w, None))
    assert seen == [] and len(g._pending) == 3 and g.checked == 3
    assert all(p[0] is small[0] and p[4] == (small[0]._version, small[1]._version,
                                              p[2]._version, None) and p[5] is True
               for p in g._pending)
    assert g._pending_bytes == 3 * (small[0].nbytes + g._pending[0][2].nbytes)
    g._pending[1][2].add_(0.0)  # (an in-place change of one recorded output: skipped)
    g.flush()
    assert g.checked == 5 and g.failed == 0 and g.stats.skipped == 1
    assert not g._pending and g._pending_bytes == 0
    for x, w, _ in (big, small):
        bad = product(x, w, None)
        bad[5, 7] += 0.25 * float(bad.abs().max())
        g.check_linear(x, w, bad)
    g.flush()
    assert g.failed == 2 and g.checked == 7
    g.defer_bytes = small[0].nbytes  # (no room: at once)
    g.check_linear(*small[:2], product(*small[:2], None))
    assert not g._pending and g.checked == 8
    g.defer_bytes = 1 << 30
    with torch.inference_mode():  # (no version counters: at once)
        xi, wi = small[0].clone(), small[1].clone()
        g.check_linear(xi, wi, product(xi, wi, None))
    assert not g._pending and g.checked == 9 and seen == []
