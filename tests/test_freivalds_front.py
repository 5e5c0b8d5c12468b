"""verify's compiled front (``_fastc.Front``): ``verify(a, b, c)`` of numpy arrays without
options runs the common call with no Python between.  It must decide exactly as the Python
verify does with the seed it drew, hand everything else to the Python verify untouched,
carry the Python verify's name, docstring and signature, and step aside wherever a
function it shortens was replaced."""
from __future__ import annotations

import inspect
import pickle

import ml_dtypes
import numpy as np
import pytest

from kcontract.errors import UsageError
from kcontract.freivalds import _core, verify

fastc = pytest.importorskip("kcontract.freivalds._fastc")
pytestmark = pytest.mark.skipif(getattr(fastc, "Front", None) is None,
                                reason="no compiled front")

BF16 = ml_dtypes.bfloat16
PY = _core.verify.__wrapped__  # the Python verify
FIELDS = ("passed", "reason", "ratio", "screen_ratio", "calibrated", "shape", "operand_format",
          "accumulate", "output_format", "check_precision", "false_alarm", "backend", "seed",
          "rounds", "groups", "bound")


def product(M, K, N, op, out=None, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32).astype(op)
    b = rng.standard_normal((K, N)).astype(np.float32).astype(op)
    acc = np.float64 if op is np.float64 else np.float32
    return a, b, (a.astype(acc) @ b.astype(acc)).astype(out or op)


def same(got, ref):
    for f in FIELDS:
        assert getattr(got, f) == getattr(ref, f), f
    assert np.array_equal(got.threshold, ref.threshold)
    assert np.array_equal(got.noise_scale, ref.noise_scale)
    assert got.suspect_elements == ref.suspect_elements
    assert got.seconds > 0


def recording_front(calls):
    """A front like verify's whose Python verify records how it was called."""
    def general(*args, **kw):
        calls.append((len(args), dict(kw)))
        return PY(*args, **kw)

    return fastc.Front(general, np.ndarray, _core._BF16, _core._F16, _core._F32, _core._clock,
                       vars(_core), ("_COMMON", "_common"))


def test_verify_is_the_front_and_carries_the_python_verifys_face():
    assert type(verify) is fastc.Front and verify is _core.verify
    assert verify.__name__ == "verify" and verify.__doc__ == PY.__doc__
    assert inspect.signature(verify) == inspect.signature(PY)
    assert "rounds" in inspect.signature(verify).parameters
    assert pickle.loads(pickle.dumps(verify)) is verify


@pytest.mark.parametrize("op,out", [(np.float32, None), (np.float64, None), (BF16, None),
                                    (BF16, np.float32), (np.float16, None),
                                    (np.float16, np.float32)])
@pytest.mark.parametrize("M,K,N", [(1, 64, 64), (65, 128, 200), (300, 256, 100)])
def test_the_front_decides_as_the_python_verify_with_its_seed(op, out, M, K, N):
    a, b, c = product(M, K, N, op, out, seed=M + K)
    calls = []
    front = recording_front(calls)
    front(a, b, c)  # (a shape's first call makes its plan in Python)
    # the front's products: those the Python verify's common call takes (it returns the
    # passing result, or the seed of a row its screen did not clear)
    ours = _core._common(a, b, c) is not None
    for _ in range(3):
        calls.clear()
        got = front(a, b, c)
        assert got.passed
        if ours:  # passed in C, or a row its screen did not clear: on in Python, its seed
            assert calls == [] or calls == [(3, {"seed": got.seed, "_resume": calls[0][1]
                                                 .get("_resume")})]
        else:
            assert calls == [(3, {})]
        same(got, PY(a, b, c, seed=got.seed))
    if op is not np.float64 and M > 1:
        assert ours, "the common call no longer takes this product"


@pytest.mark.parametrize("op", [np.float32, BF16])
def test_a_product_the_front_does_not_pass_goes_on_in_python_with_its_seed(op):
    a, b, c = product(200, 256, 128, op, seed=3)
    bad = c.copy()
    bad[17, 33] = bad[17, 33] + 0.5 * float(np.abs(c.astype(np.float32)).max())
    calls = []
    front = recording_front(calls)
    assert front(a, b, c).passed  # (the shape's plan)
    calls.clear()
    got = front(a, b, bad)
    assert not got.passed and (17, 33) in got.suspect_elements
    assert len(calls) == 1
    n, kw = calls[0]
    assert n == 3 and set(kw) == {"seed", "_resume"} and kw["seed"] == got.seed
    same(got, PY(a, b, bad, seed=got.seed))


def test_options_and_other_inputs_go_to_the_python_verify_as_given():
    a, b, c = product(64, 128, 96, np.float32, seed=5)
    calls = []
    front = recording_front(calls)
    same(front(a, b, c, seed=11), PY(a, b, c, seed=11))
    assert calls == [(3, {"seed": 11})]
    calls.clear()
    class Sub(np.ndarray):
        pass

    res = front(a.view(Sub), b, c)  # not an ndarray itself: the Python verify's
    assert res.passed and calls == [(3, {})]
    calls.clear()
    res = front(a[None], b[None], c[None])  # a batch: not the 2-D common call
    assert res.passed and calls == [(3, {})]
    calls.clear()
    with pytest.raises(TypeError):
        front(a, b)
    assert calls == [(2, {})]


@pytest.mark.parametrize("b_dt,c_dt", [(np.float32, BF16), (BF16, np.float16),
                                       (BF16, np.float64)])
def test_mixed_formats_get_the_python_verifys_answer(b_dt, c_dt):
    a, b, c = product(64, 128, 96, BF16, seed=6)
    b, c = b.astype(b_dt), c.astype(c_dt)
    calls = []
    front = recording_front(calls)
    try:
        got = front(a, b, c)
    except UsageError as exc:
        with pytest.raises(UsageError, match=str(exc)[:30]):
            PY(a, b, c)
    else:
        same(got, PY(a, b, c, seed=got.seed))
    assert calls == [(3, {})]


def test_the_front_steps_aside_where_a_function_it_shortens_was_replaced(monkeypatch):
    a, b, c = product(65, 128, 200, np.float32, seed=8)
    calls = []
    front = recording_front(calls)
    front(a, b, c)  # (the shape's plan)
    seen = []
    real = _core._COMMON
    monkeypatch.setattr(_core, "_COMMON", lambda *x: seen.append(1) or real(*x))
    calls.clear()
    assert front(a, b, c).passed and seen == [1] and calls == [(3, {})]
    monkeypatch.undo()
    monkeypatch.setattr(_core, "_common", lambda *x: seen.append(2))  # declines every call
    calls.clear()
    assert front(a, b, c).passed and seen == [1, 2] and calls == [(3, {})]
    monkeypatch.undo()
    calls.clear()
    for _ in range(5):  # the functions as made again: the front's own
        assert front(a, b, c).passed
    assert len(calls) <= 1 and seen == [1, 2]


def test_the_front_takes_no_bad_arguments():
    with pytest.raises(TypeError, match="Front"):
        fastc.Front(1, 2, 3)
    with pytest.raises(KeyError, match="no_such"):
        fastc.Front(PY, np.ndarray, _core._BF16, _core._F16, _core._F32, _core._clock,
                    vars(_core), ("no_such",))
