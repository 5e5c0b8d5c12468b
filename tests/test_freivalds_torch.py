"""Tests of kcontract.freivalds with torch: tensors, the guard, and the
verify-matmul file function (``.npy`` and ``.pt``)."""
from __future__ import annotations

import json
import logging
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.overrides import TorchFunctionMode  # noqa: E402

from kcontract.errors import UsageError  # noqa: E402
from kcontract.freivalds import (ProductCheckError, guard, verify,  # noqa: E402
                                 verify_matmul_files)
from kcontract.freivalds._guard import ProductCheckWarning  # noqa: E402


def t(shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


# ---------------------------------------------------------------------------
# verify on tensors
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_tensor_honest_and_corrupted(dtype):
    A, B = t((96, 64), 1, dtype), t((64, 80), 2, dtype)
    C = A @ B
    res = verify(A, B, C)
    assert res.passed and res.backend == "torch", res.message
    C2 = C.clone()
    C2[10, 11] += 0.25 * C.abs().max()
    res = verify(A, B, C2, repair=True)
    assert not res.passed and res.suspect_elements == [(10, 11)]
    assert isinstance(res.repaired, torch.Tensor) and res.repaired.dtype == dtype
    assert verify(A, B, res.repaired).passed


def test_tensor_fp8_operands():
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("no float8 in this torch")
    A, B = t((64, 32), 3).to(torch.float8_e4m3fn), t((32, 48), 4).to(torch.float8_e4m3fn)
    C = A.float() @ B.float()
    assert verify(A, B, C).passed
    C[0, 0] += 1.0
    assert verify(A, B, C).suspect_elements == [(0, 0)]


def test_tensor_batched_bmm():
    A, B = t((6, 40, 30), 5), t((6, 30, 20), 6)
    C = torch.bmm(A, B)
    assert verify(A, B, C).passed
    C[5, 39, 0] -= 1.0
    assert verify(A, B, C).suspect_elements == [(5, 39, 0)]


def test_tensor_requires_grad_and_noncontiguous():
    A = t((50, 40), 7).requires_grad_()
    B = t((60, 40), 8).T  # a transposed view
    C = A @ B
    assert verify(A, B, C).passed


def test_tensor_nonfinite():
    A, B = t((20, 10), 9), t((10, 5), 10)
    C = A @ B
    C[1, 1] = float("nan")
    res = verify(A, B, C)
    assert not res.passed and res.reason == "nonfinite" and res.suspect_elements == [(1, 1)]
    A[0, 0] = float("inf")
    with pytest.raises(UsageError, match="operand a"):
        verify(A, B, A @ B)


# ---------------------------------------------------------------------------
# the guard
# ---------------------------------------------------------------------------

class Corrupt(TorchFunctionMode):
    """Entered outside a guard: corrupts one element of every matmul result."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in (torch.matmul, torch.Tensor.matmul, torch.mm, torch.bmm,
                    torch.nn.functional.linear) and isinstance(out, torch.Tensor):
            out = out.clone()
            out.view(-1)[0] += 1.0 + out.abs().max()
        return out


def test_guard_checks_all_matmul_forms():
    x, W = t((32, 48), 1), t((64, 48), 2)
    lin = torch.nn.Linear(48, 64)
    with guard() as g:
        x @ W.T
        torch.matmul(x, W.T)
        x.matmul(W.T)
        torch.mm(x, W.T)
        torch.bmm(x[None], W.T[None])
        torch.nn.functional.linear(x, W)
        lin(x)
        torch.matmul(x[0], W.T)  # 1-D left operand
        torch.matmul(x, W[0])  # 1-D right operand
        torch.matmul(x[0], x[1])  # 1-D @ 1-D: a dot product
        torch.matmul(t((3, 32, 48), 9), W.T)  # batched @ 2-D
        torch.linalg.matmul(x, W.T)
        torch.mv(W, x[0])  # matrix times vector
        W.mv(x[0])
        x + 1  # not a matmul
    assert g.stats.calls == 14 and g.checked == 14 and g.failed == 0
    assert g.seconds > 0 and g.stats.skipped == 0 and g.stats.errors == 0
    # per op kind: every check counted once under its op, the time split among them
    ops = g.stats.as_dict()["by_op"]
    assert set(ops) == {"matmul", "mm", "bmm", "linear", "mv"}
    assert sum(o["checked"] for o in ops.values()) == 14 and ops["mv"]["checked"] == 2
    assert ops["linear"]["checked"] == 2 and ops["bmm"]["checked"] == 1
    assert sum(o["seconds"] for o in ops.values()) == pytest.approx(g.seconds)
    assert all(0 <= o["screened"] <= o["checked"] for o in ops.values())


def test_guard_checks_broadcast_batches_and_finds_a_wrong_element_in_them():
    """matmul's batch dimensions broadcast (one side without, one of size 1): the guard
    checks the product it computed and finds a wrong element of it."""
    a, b = t((2, 1, 32, 48), 3), t((3, 48, 40), 4)
    with guard() as g:
        torch.matmul(a, b)
        torch.matmul(t((32, 48), 5), b)  # 2-D @ batch
        torch.matmul(a, t((48, 40), 6))  # batch @ 2-D
    assert g.checked == 3 and g.failed == 0 and g.stats.skipped == 0 and g.stats.errors == 0

    class Corrupt(TorchFunctionMode):  # the first product only (not the checker's own)
        done = False

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.matmul and not self.done:
                self.done = True
                out[1, 2, 7, 5] += 1e-3 * float(out.abs().max())
            return out

    with pytest.raises(ProductCheckError) as err:
        with Corrupt(), guard():  # (the guard above: it sees the corrupted output)
            torch.matmul(a, b)
    assert err.value.result.suspect_elements == [(1, 2, 7, 5)]


def test_cpu_tensors_rows_recomputed_on_host_views_as_torch_would():
    """The float64 recomputation of screened rows of CPU tensors runs on host views (numpy):
    the same numbers as torch's float64 product, for batches, 16-bit formats and tensors
    that require grad."""
    from kcontract.freivalds._backend import ops_for

    for dt in (torch.float32, torch.bfloat16):
        A = t((2, 3, 32, 48), 7).to(dt).requires_grad_(dt is torch.float32)
        B = t((2, 3, 48, 40), 8).to(dt)
        pairs = [((1, 2), (1, 2), 5), ((0, 1), (0, 1), 31), ((1, 2), (1, 2), 0)]
        ops = ops_for(A, B)
        cstar, abssum = ops.exact_rows(A, B, pairs)
        for k, (ai, bi, i) in enumerate(pairs):
            a64, b64 = A.detach()[ai][i].double(), B[bi].double()
            np.testing.assert_allclose(cstar[k], (a64 @ b64).numpy(), rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(abssum[k], (a64.abs() @ b64.abs()).numpy(), rtol=1e-13)


def test_guard_raise_warn_log(caplog):
    x, W = t((16, 8), 3), t((8, 12), 4)
    with Corrupt():
        with pytest.raises(ProductCheckError) as ei:
            with guard(on_fail="raise"):
                x @ W
        assert not ei.value.result.passed
        assert ei.value.result.suspect_elements == [(0, 0)]
        with guard(on_fail="warn") as g:
            with warnings.catch_warnings(record=True) as rec:
                warnings.simplefilter("always")
                torch.mm(x, W)
        assert g.failed == 1 and any(issubclass(w.category, ProductCheckWarning) for w in rec)
        with caplog.at_level(logging.ERROR, logger="kcontract.freivalds"):
            with guard(on_fail="log") as g:
                torch.nn.functional.linear(x, W.T)
        assert g.failed == 1 and "failed verification" in caplog.text
        assert g.stats.failures and g.stats.failures[0][0] == "linear"
        # the corrupted row went past the screen: counted as a screened check of its op
        assert g.stats.by_op["linear"][:1] == [1] and g.stats.by_op["linear"][2] == 1


def test_guard_decorator_and_sampling():
    g = guard(sample=0.0)

    @g
    def f(a, b):
        return a @ b

    f(t((4, 4)), t((4, 4)))
    f(t((4, 4)), t((4, 4)))
    assert g.stats.calls == 2 and g.stats.sampled_out == 2 and g.checked == 0
    g2 = guard(sample=1.0)
    g2(f)(t((4, 4)), t((4, 4)))
    assert g2.checked == 1
    with pytest.raises(UsageError):
        guard(on_fail="explode")
    with pytest.raises(UsageError):
        guard(sample=2.0)


def test_guard_weight_cache_and_invalidation():
    lin = torch.nn.Linear(40, 30)
    x = t((20, 40), 5)
    with torch.no_grad(), guard() as g:
        for _ in range(4):
            lin(x)
        assert g.stats.cache_hits == 3
        lin.weight.mul_(2.0)  # in-place update: the cached vector must not be reused
        lin(x)
        lin(x)
    assert g.checked == 6 and g.failed == 0 and g.stats.cache_hits == 4


def test_guard_skips_uncheckable():
    a = torch.arange(12).reshape(3, 4)
    b = torch.arange(8).reshape(4, 2)
    x = t((3, 4), 6)
    x[0, 0] = float("nan")
    with guard() as g:
        a @ b  # integer matmul: not checkable
        x @ t((4, 2), 7)  # NaN operand: no reference
    assert g.stats.calls == 2 and g.stats.skipped == 2 and g.failed == 0
    assert g.stats.by_op == {}  # skipped calls are no op's checks


def test_guard_inference_mode_and_autograd():
    lin = torch.nn.Linear(16, 8)
    x = t((5, 16), 8)
    with torch.inference_mode(), guard() as g:
        lin(x)
        lin(x)
    assert g.checked == 2 and g.failed == 0
    with guard() as g:
        y = lin(x.requires_grad_())
        y.sum().backward()
    assert g.failed == 0 and x.grad is not None


# ---------------------------------------------------------------------------
# verify-matmul on files
# ---------------------------------------------------------------------------

def _files(tmp_path, A, B, C, ext=".npy"):
    paths = []
    for name, x in (("a", A), ("b", B), ("c", C)):
        p = tmp_path / f"{name}{ext}"
        if ext == ".npy":
            np.save(p, x)
        else:
            torch.save(x, p)
        paths.append(str(p))
    return paths


def test_files_exit_codes(tmp_path, capsys):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 30)).astype(np.float32)
    B = rng.standard_normal((30, 20)).astype(np.float32)
    C = A @ B
    a, b, c = _files(tmp_path, A, B, C)
    assert verify_matmul_files(a, b, c, rounds=1, seed=1, accumulate=None, as_json=False) == 0
    assert "VERIFIED" in capsys.readouterr().out
    C[3, 4] += 1
    np.save(c, C)
    assert verify_matmul_files(a, b, c, rounds=1, seed=1, accumulate=None, as_json=False) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "3,4" in out
    assert verify_matmul_files(a, b, c, rounds=2, seed=1, accumulate="float32", as_json=True) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["exit_code"] == 1 and d["suspects"][0]["index"] == [3, 4] and d["rounds"] == 2
    # bad input -> 2
    np.save(tmp_path / "bad.npy", np.zeros((7, 7), np.float32))
    assert verify_matmul_files(a, str(tmp_path / "bad.npy"), c, rounds=1, seed=None,
                               accumulate=None, as_json=False) == 2
    assert "inner dimensions" in capsys.readouterr().err
    assert verify_matmul_files(a, b, str(tmp_path / "missing.npy"), rounds=1, seed=None,
                               accumulate=None, as_json=True) == 2
    assert json.loads(capsys.readouterr().out)["exit_code"] == 2
    (tmp_path / "x.txt").write_text("1 2 3")
    assert verify_matmul_files(a, b, str(tmp_path / "x.txt"), rounds=1, seed=None,
                               accumulate=None, as_json=False) == 2
    (tmp_path / "junk.npy").write_bytes(b"not an array")
    assert verify_matmul_files(a, b, str(tmp_path / "junk.npy"), rounds=1, seed=None,
                               accumulate=None, as_json=False) == 2
    np.save(tmp_path / "nan.npy", np.full((40, 30), np.nan, np.float32))
    assert verify_matmul_files(str(tmp_path / "nan.npy"), b, c, rounds=1, seed=None,
                               accumulate=None, as_json=False) == 2
    assert verify_matmul_files(a, b, c, rounds=0, seed=None, accumulate=None,
                               as_json=False) == 2


def test_files_torch_and_mixed(tmp_path, capsys):
    A, B = t((30, 20), 1, torch.bfloat16), t((20, 10), 2, torch.bfloat16)
    C = A @ B
    a, b, c = _files(tmp_path, A, B, C, ext=".pt")
    assert verify_matmul_files(a, b, c, rounds=1, seed=3, accumulate=None, as_json=False) == 0
    # mixed .pt / .npy: converted to numpy.  C holds bfloat16 values stored as
    # float32: declared as bfloat16 output it passes, as float32 output it fails
    np.save(tmp_path / "c32.npy", C.float().numpy())
    c32 = str(tmp_path / "c32.npy")
    assert verify_matmul_files(a, b, c32, rounds=1, seed=3, accumulate=None, as_json=False,
                               output_format="bfloat16") == 0
    assert verify_matmul_files(a, b, c32, rounds=1, seed=3, accumulate=None, as_json=False) == 1
    # numpy cannot store bfloat16 in .npy (it reads back as raw bytes)
    import ml_dtypes
    np.save(tmp_path / "raw.npy", np.ones((30, 10), ml_dtypes.bfloat16))
    assert verify_matmul_files(a, b, str(tmp_path / "raw.npy"), rounds=1, seed=3,
                               accumulate=None, as_json=False) == 2
    assert "raw bytes" in capsys.readouterr().err
    torch.save({"x": C}, tmp_path / "dict.pt")
    assert verify_matmul_files(a, b, str(tmp_path / "dict.pt"), rounds=1, seed=3,
                               accumulate=None, as_json=False) == 2
    capsys.readouterr()


# ---------------------------------------------------------------------------
# stage 1 on CPU tensors: host views, the same decision as numpy
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_torch_and_numpy_take_the_same_stage1_decision(dtype):
    from kcontract.freivalds._backend import ops_for

    A, B = t((300, 128), 21, dtype), t((128, 90), 22, dtype)
    C = (A.float() @ B.float()).to(dtype)
    ops = ops_for(A, B, C)
    views = [ops.host_view(x) for x in (A, B, C)]
    # views share the tensors' memory: no copy
    assert [v.__array_interface__["data"][0] for v in views] == [x.data_ptr() for x in (A, B, C)]
    assert np.array_equal(views[0].astype(np.float32), A.float().numpy())
    rt, rn = verify(A, B, C, seed=9), verify(*views, seed=9)
    assert rt.passed and rn.passed
    # narrow formats are widened on the host by the same code: the same residual;
    # float32 goes through torch's own gemv (another rounding order)
    rel = 1e-12 if dtype != torch.float32 else 0.2
    assert float(rt.threshold) == pytest.approx(float(rn.threshold), rel=rel)
    C[17, 5] += 0.5 * C.float().abs().max().to(dtype)
    assert verify(A, B, C, seed=9).suspect_elements == [(17, 5)]


def test_guard_cache_holds_the_weight_scale():
    lin = torch.nn.Linear(256, 64, bias=True)
    x = t((200, 256), 23)
    with torch.no_grad(), guard() as g:
        lin(x)
        lin(x)
    assert g.checked == 2 and g.failed == 0 and g.stats.cache_hits == 1
    proj = next(iter(g._cache.entries.values()))[2]
    w = lin.weight.detach().double()
    assert proj.b_rms == pytest.approx(float(w.norm() / 256 ** 0.5), rel=0.5)


def test_split3_carries_float32_precision():
    """The accelerator path multiplies a bfloat16 matrix by a float32 vector as
    three bfloat16 columns: their sum must be the vector to ~2^-24."""
    from kcontract.freivalds._backend import split3

    v = t((4096,), 31) * torch.logspace(-20, 20, 4096)
    V = split3(torch, v)
    assert V.dtype == torch.bfloat16 and V.shape == (4096, 3)
    back = V.double().sum(dim=1)
    rel = ((back - v.double()).abs() / v.double().abs()).max()
    assert rel < 2.0 ** -23
    X = t((64, 4096), 32).bfloat16()
    z = (X.double() @ V.double()).sum(dim=1)
    zref = X.double() @ v.double()
    assert torch.allclose(z, zref, rtol=1e-6, atol=1e-6 * float(zref.abs().max()))


def test_guard_checks_a_batched_linear_as_one_stacked_product(monkeypatch):
    # a linear layer over (batch, tokens, features): the rows are stacked into one 2-D
    # product with the shared weight, which takes the common-call path; a corrupted
    # element is still caught, at its stacked row
    from kcontract.freivalds import _core
    lin = torch.nn.Linear(96, 80)
    x = t((3, 40, 96), 5)
    seen = []
    real = _core._fast
    monkeypatch.setattr(_core, "_fast", lambda *a, **k: seen.append(a[0].shape) or real(*a, **k))
    with torch.no_grad(), guard(on_fail="raise") as g:
        lin(x)
        lin(x)
    assert g.checked == 2 and g.failed == 0
    assert seen and all(tuple(s) == (120, 96) for s in seen)
    with Corrupt():
        with pytest.raises(ProductCheckError) as ei:
            with guard(on_fail="raise"):
                lin(x)
    assert ei.value.result.suspect_elements == [(0, 0)]
    # with autograd on, the parameters' values are checked the same way
    with guard(on_fail="raise") as g:
        lin(x).sum().backward()
    assert g.checked >= 1 and g.failed == 0


# ---------------------------------------------------------------------------
# faulty kernels beneath the guard
# ---------------------------------------------------------------------------

class _Kernel(TorchFunctionMode):
    """A faulty stack beneath the guard: rewrites what matmul and F.linear return, and
    records every torch call that reaches it."""

    def __init__(self, linear=None, matmul=None):
        super().__init__()
        self.linear, self.matmul, self.seen = linear, matmul, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(func)
        out = func(*args, **(kwargs or {}))
        if func is torch.nn.functional.linear and self.linear:
            return self.linear(out)
        if func is torch.matmul and self.matmul:
            return self.matmul(out)
        return out


@pytest.mark.parametrize("op, fault", [
    ("linear", lambda o: o[:, :1]),  # a column where the product has N
    ("linear", lambda o: o[:1]),  # a row: would broadcast over a bias
    ("matmul", lambda o: o.reshape(-1)),  # the right values, flattened
    ("matmul", lambda o: o.T.contiguous()),  # transposed
])
def test_an_output_without_the_products_shape_fails_the_check(op, fault):
    x, w = t((5, 128), 3), t((96, 128), 4)
    kernel = _Kernel(**{op: fault})
    with pytest.raises(ProductCheckError, match=r"\(shape\)") as err:
        with kernel:
            with guard():
                torch.nn.functional.linear(x, w) if op == "linear" else torch.matmul(x, w.T)
    assert err.value.result.reason == "shape" and not err.value.result.passed
    with kernel:  # counted as a failure where it does not raise
        with guard(on_fail="log") as g:
            torch.nn.functional.linear(x, w) if op == "linear" else torch.matmul(x, w.T)
    assert g.failed == 1 and g.stats.errors == 0 and g.stats.skipped == 0


def test_the_guards_own_torch_calls_reach_no_mode_beneath_it():
    """Only the intercepted products reach a mode entered before the guard: the check's
    own products and views do not (such a mode could refuse them, or change them)."""
    a, b = t((3, 1, 96, 64), 5), t((4, 64, 96), 6)
    x, w = t((40, 128), 7), t((96, 128), 8)
    kernel = _Kernel(matmul=lambda o: o.index_put_((torch.tensor([2]),) * 4, o.new_ones(1)))
    with pytest.raises(ProductCheckError):
        with kernel:
            with guard():
                torch.nn.functional.linear(x, w)
                torch.nn.functional.linear(x, w)  # (the cached weight projection's path)
                torch.matmul(a, b)  # broadcast batch: the general path's calls
    assert kernel.seen == [torch.nn.functional.linear] * 2 + [torch.matmul]


def test_a_deferred_check_the_checker_cannot_make_is_counted_and_the_others_run(
        monkeypatch):
    from kcontract.freivalds import _guard

    x, w = t((8, 96), 9), t((64, 96), 10)
    bad = torch.nn.functional.linear(x, w)
    bad[3, 5] += 1.0
    real = _guard.Guard._linear_now
    calls = []

    def flaky(self, *args):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a checker bug")
        return real(self, *args)

    monkeypatch.setattr(_guard.Guard, "_linear_now", flaky)
    g = guard(defer=True, on_fail="log")
    for out in (torch.nn.functional.linear(x, w), bad):
        g.check_linear(x, w, out)
    g.flush()  # no exception out of it: the error counted, the second check still made
    assert len(calls) == 2 and g.stats.errors == 1 and g.failed == 1


def test_a_tensor_subclass_cannot_show_the_check_other_values():
    a, b = t((64, 80), 11), t((80, 96), 12)
    good = a @ b

    class Liar(torch.Tensor):
        def detach(self):
            return good

        def numpy(self, *args, **kwargs):
            return good.numpy()

    assert not verify(a, b, (good + 1).as_subclass(Liar)).passed
    assert verify(a, b, good.as_subclass(Liar)).passed
    assert not verify(a.as_subclass(Liar), b, good + 1).passed


@pytest.mark.parametrize("seed", [-1, 1.5, "x"])
def test_a_guards_bad_seed_is_a_usage_error(seed):
    with pytest.raises(UsageError, match="seed must be None or a non-negative integer"):
        guard(seed=seed)


def test_the_guard_checks_a_narrow_head_column_by_column():
    """A linear layer of 4 outputs (a classifier's head): not cached, one residual per
    column, so two wrong elements of a row that would cancel are caught every time."""
    x, w = t((64, 128), 13), t((4, 128), 14)
    kernel = _Kernel(linear=lambda o: o + torch.tensor([1.0, 1.0, 0.0, 0.0]))
    for seed in range(8):
        with kernel:
            with guard(seed=seed, on_fail="log") as g:
                for _ in range(3):
                    torch.nn.functional.linear(x, w)
        assert g.failed == 3 and g.last_result.groups == 4


def test_operands_near_float32s_limit_raise_no_numpy_warnings():
    """Overflow of the float32 check's own sums is detected and redone in float64: the
    user sees a verdict, not numpy's overflow warnings."""
    a, b = t((128, 128), 15) * 1e18, t((128, 128), 16) * 1e18
    c = a @ b
    bad = c.clone()
    bad[5, 6] *= 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert verify(a, b, c).passed and not verify(a, b, bad).passed
        with guard(on_fail="log") as g:
            for _ in range(2):
                torch.nn.functional.linear(a, b.T.contiguous())
    assert g.checked == 2 and g.failed == 0 and g.stats.errors == 0


# addmm and baddbmm: a linear layer written as GPT-2's Conv1D, attention's scaled scores
# ---------------------------------------------------------------------------

class _Conv1D(torch.nn.Module):
    """A linear layer as GPT-2's implementation writes it: a K x N weight and
    ``torch.addmm(bias, x, weight)`` on the rows of x."""

    def __init__(self, nx, nf, seed):
        super().__init__()
        self.weight = torch.nn.Parameter(t((nx, nf), seed) * 0.1)
        self.bias = torch.nn.Parameter(t((nf,), seed + 1))

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


class _Fault(TorchFunctionMode):
    """Beneath the guard: adds size * max|out| to one element of the n-th result of func
    (size: 1e-3, well beyond float32's rounding; a bfloat16 output's rounding, 2^-9 of
    each element, summed over a row of N signs, hides less than about sqrt(N) 2^-9 of the
    row's magnitude: a wrong element needs more than that to be seen)."""

    def __init__(self, func, n=0, where=(0, 0), size=1e-3):
        super().__init__()
        self.func, self.n, self.where, self.seen, self.size = func, n, where, 0, size

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is self.func:
            if self.seen == self.n:
                out = out.clone()
                out[self.where] += self.size * float(out.abs().max())
            self.seen += 1
        return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_guard_checks_addmm_layers_and_catches_a_wrong_element(dtype):
    mlp = torch.nn.Sequential(_Conv1D(96, 384, 1), torch.nn.GELU(), _Conv1D(384, 96, 3)).to(dtype)
    x = t((2, 40, 96), 5, dtype)
    with torch.no_grad():
        for _ in range(2):  # (the second pass: the weights' cached projections)
            with guard() as g:
                mlp(x)
            assert g.checked == 2 and g.failed == 0 and g.stats.skipped == 0
            assert set(g.stats.as_dict()["by_op"]) == {"addmm"}
        for n in (0, 1):  # either layer's product, one element off
            with pytest.raises(ProductCheckError) as err:
                with _Fault(torch.addmm, n, (7, 11), 1e-3 if dtype is torch.float32 else 0.25):
                    with guard():
                        mlp(x)
            assert err.value.result.suspect_elements == [(7, 11)]


def test_the_guard_reads_addmms_other_spellings():
    a, b, bias = t((33, 64), 1), t((64, 80), 2), t((80,), 3)
    with guard() as g:
        bias.addmm(a, b)  # the method
        torch.addmm(input=bias[None], mat1=a, mat2=b)  # keywords; input one row of N
        torch.addmm(t((33, 80), 4), a, b, beta=0)  # input ignored
        torch.addmm(bias, a, b, alpha=0.25)  # a power of two
    assert g.checked == 4 and g.failed == 0 and g.stats.skipped == 0
    with guard() as g:  # forms the guard does not check: counted, not judged
        torch.addmm(t((33, 80), 4), a, b)  # an input of more than one row
        torch.addmm(bias, a, b, alpha=0.3)
        torch.addmm(bias, a, b, beta=0.5)
    assert g.checked == 0 and g.stats.skipped == 3 and g.stats.errors == 0
    with pytest.raises(ProductCheckError):
        with _Fault(torch.addmm, 0, (5, 6)):
            with guard():
                torch.addmm(bias, a, b, alpha=0.25)


def test_the_guard_checks_baddbmm_attention_scores():
    """Attention's scores as some implementations write them: ``baddbmm(empty, q, k^T,
    beta=0, alpha=1/sqrt(d))`` (d = 64: a power of two, checked); a shared row bias too."""
    q, k = t((6, 40, 64), 1), t((6, 40, 64), 2)
    empty = torch.empty(6, 40, 40)
    with guard() as g:
        torch.baddbmm(empty, q, k.transpose(-1, -2), beta=0, alpha=0.125)
        torch.baddbmm(t((40,), 3), q, k.transpose(-1, -2))
        empty.baddbmm(q, k.transpose(-1, -2), beta=0)
    assert g.checked == 3 and g.failed == 0 and g.stats.skipped == 0
    with guard() as g:  # 1/sqrt(128) is not a power of two: not checked, counted
        torch.baddbmm(empty, q, k.transpose(-1, -2), beta=0, alpha=128 ** -0.5)
    assert g.checked == 0 and g.stats.skipped == 1
    with pytest.raises(ProductCheckError) as err:
        with _Fault(torch.baddbmm, 0, (4, 9, 30)):
            with guard():
                torch.baddbmm(empty, q, k.transpose(-1, -2), beta=0, alpha=0.125)
    assert err.value.result.suspect_elements == [(4, 9, 30)]


# einsum: the products attention and other layers write as equations
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("equation, sa, sb", [
    ("ij,jk->ik", (33, 64), (64, 40)),
    ("ij,jk", (33, 64), (64, 40)),  # implicit output
    ("ik,kj->ji", (33, 64), (64, 40)),  # the output transposed
    ("bhqd,bhkd->bhqk", (2, 3, 40, 64), (2, 3, 48, 64)),  # attention's scores
    ("bhqk,bhkd->bhqd", (2, 3, 40, 48), (2, 3, 48, 64)),  # and their values
    ("b i d, b j d -> b i j", (4, 40, 64), (4, 48, 64)),  # with spaces
    ("bnd,de->bne", (3, 40, 64), (64, 80)),  # a weight shared by the batch (M = b n)
    ("...ij,...jk->...ik", (2, 3, 33, 64), (2, 3, 64, 40)),  # broadcast dimensions
    ("...ij,jk->...ik", (2, 3, 33, 64), (64, 40)),
    ("bqhd,bkhd->bhqk", (2, 40, 3, 64), (2, 48, 3, 64)),  # heads in the middle
    ("bij,bjk->bik", (1, 33, 64), (5, 64, 40)),  # a batch of 1 broadcast
    ("i,j->ij", (70,), (80,)),  # the outer product (K = 1)
])
def test_the_guard_checks_einsum_products_and_catches_a_wrong_element(equation, sa, sb):
    a, b = t(sa, 1), t(sb, 2)
    with guard() as g:
        out = torch.einsum(equation, a, b)
        torch.einsum(equation, [a, b])  # the operands as a list
    assert g.checked == 2 and g.failed == 0 and g.stats.skipped == 0
    assert set(g.stats.as_dict()["by_op"]) == {"einsum"}
    where = tuple(n // 2 for n in out.shape)
    with pytest.raises(ProductCheckError):
        with _Fault(torch.einsum, 0, where):
            with guard():
                torch.einsum(equation, a, b)


def test_einsum_forms_that_are_not_one_product_are_counted_not_judged():
    a, b, c = t((33, 64), 1), t((64, 40), 2), t((40, 20), 3)
    with guard() as g:
        torch.einsum("ij,jk,kl->il", a, b, c)  # three operands
        torch.einsum("ij,jk->k", a, b)  # i summed within one operand
        torch.einsum("ij,ij->ij", a, a)  # no index summed across: elementwise
        torch.einsum("ii->i", t((5, 5), 4))  # one operand: no product
        torch.einsum("ij->ji", a)
    assert g.checked == 0 and g.failed == 0 and g.stats.errors == 0
    assert g.stats.skipped == 3 and g.stats.calls == 3
    with guard() as g:  # the sublist form: torch hands it over as "ab,bc->ac"
        torch.einsum(a, [0, 1], b, [1, 2], [0, 2])
    assert g.checked == 1 and g.stats.skipped == 0 and g.failed == 0


def test_fused_attention_is_counted_as_skipped_not_as_checked():
    """scaled_dot_product_attention returns neither q k^T nor the probabilities: the
    guard cannot check its products at a check's cost and says so in its counts."""
    q, k, v = t((2, 3, 40, 64), 1), t((2, 3, 40, 64), 2), t((2, 3, 40, 64), 3)
    with guard() as g:
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        q @ k.transpose(-1, -2)
    assert g.stats.calls == 2 and g.checked == 1 and g.stats.skipped == 1


def test_a_wrong_element_of_a_matrix_vector_product_is_caught():
    W, v = t((300, 128), 1), t((128,), 2)
    with guard() as g:
        torch.mv(W, vec=v)
    assert g.checked == 1 and g.failed == 0
    with pytest.raises(ProductCheckError):
        with _Fault(torch.mv, 0, (77,)):
            with guard():
                torch.mv(W, v)
