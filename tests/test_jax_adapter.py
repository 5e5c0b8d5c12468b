"""The JAX adapter, and the adapter registry: a framework is one module plus one line."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

from kcontract.adapters import FRAMEWORKS, REGISTRY, adapter_class, get_adapter
from kcontract.errors import UsageError


def test_every_registered_adapter_is_named_as_registered():
    for name in REGISTRY:
        cls = adapter_class(name)
        assert cls.name == name
        assert cls.DEVICES and isinstance(cls.DEVICES, tuple)
    assert list(FRAMEWORKS) == list(REGISTRY)


def test_language_and_default_scope_read_the_registry():
    from kcontract.language import loader
    from kcontract.language.contract import Scope
    assert loader.FRAMEWORKS is FRAMEWORKS
    assert list(Scope(op="sum", dtypes=("float32",)).frameworks) == list(REGISTRY)


def test_a_new_framework_is_one_module_and_one_registry_line(tmp_path, monkeypatch):
    pkg = tmp_path / "kc_fakefw"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "adapter.py").write_text(textwrap.dedent("""
        from kcontract.adapters.numpy_adapter import NumpyAdapter

        class FakeAdapter(NumpyAdapter):
            name = "fakefw"

            def environment(self, device):
                env = super().environment(device)
                env["framework"] = "fakefw"
                return env
    """))
    (tmp_path / "fake_kernels.py").write_text("import numpy as np\n"
                                              "def sum(x):\n    return np.sum(x, axis=-1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(REGISTRY, "fakefw", "kc_fakefw.adapter:FakeAdapter")  # the one line
    assert "fakefw" in FRAMEWORKS
    assert get_adapter("fakefw").name == "fakefw"
    from kcontract.check.runner import check
    run = check(f"{tmp_path / 'fake_kernels.py'}:sum", op="sum", dtype="float32",
                framework="fakefw", classes=["C-ORD-02"], in_process=True)
    assert run.environment["framework"] == "fakefw"
    assert [r.verdict.value for r in run.results] == ["pass"]  # in scope, not skipped


def test_unknown_framework_is_a_usage_error():
    with pytest.raises(UsageError, match="did you mean jax"):
        get_adapter("jaxx")


jax = pytest.importorskip("jax")


@pytest.fixture(scope="module")
def ad():
    return get_adapter("jax")


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn"])
def test_round_trip_keeps_the_dtype_and_the_bits(ad, dtype):
    from kcontract.formats import get_format
    x = np.linspace(-3, 3, 24).reshape(4, 6).astype(get_format(dtype).dtype)
    native = ad.to_native(x, "cpu")
    assert ad.is_array(native) and not ad.is_array(x)
    back, meta = ad.to_numpy(native)
    assert back.dtype == x.dtype and meta["dtype"] == dtype  # float64 stays float64 (x64 on)
    assert back.tobytes() == x.tobytes()
    assert meta["shape"] == (4, 6) and meta["contiguous"]
    assert meta["strides"] == (6 * x.itemsize, x.itemsize)


def test_a_zero_dimensional_argument_stays_zero_dimensional(ad):
    # top-k's k and conv2d's stride arrive as 0-d int64 arrays: a copy that made them 1-d
    # read as "the kernel modified its input" once the worker compared them back
    k = np.array(8, dtype=np.int64)
    back, meta = ad.to_numpy(ad.to_native(k, "cpu"))
    assert back.shape == () and meta["shape"] == () and back.dtype == np.int64 and back == 8
    strided = np.arange(12.0).reshape(3, 4)[:, ::2]
    assert ad.to_numpy(ad.to_native(strided, "cpu"))[0].tolist() == strided.tolist()


def test_devices_as_jax_names_them(ad):
    assert ad.device("cpu").platform == "cpu"
    assert ad.device("cpu:0").platform == "cpu"
    with pytest.raises(UsageError, match="no 'tpu' device|JAX sees"):
        ad.device("tpu")
    with pytest.raises(UsageError, match="JAX sees 1 cpu"):
        ad.device("cpu:7")


def test_state_snapshot_sees_a_flipped_config_and_restores_it(ad):
    before = ad.state()
    assert before["jax_enable_x64"] is True
    jax.config.update("jax_default_matmul_precision", "bfloat16")
    try:
        after = ad.state()
        assert after["jax_default_matmul_precision"] != before["jax_default_matmul_precision"]
    finally:
        ad.restore(before)
    assert ad.state() == before


def test_environment_names_the_stack(ad):
    env = ad.environment("cpu")
    assert env["framework"] == "jax" and env["jax"] == jax.__version__
    assert env["jaxlib"] and env["platform"] == "cpu" and env["device_name"]
    assert env["jax_config"]["jax_enable_x64"] is True


JAX_KERNELS = '''
import jax
import jax.numpy as jnp

def sum(x):
    return jnp.sum(x, axis=-1)

def sum_flips_precision(x):
    jax.config.update("jax_default_matmul_precision", "bfloat16")
    return jnp.sum(x, axis=-1)
'''


def test_a_jax_kernel_through_the_isolated_worker(tmp_path):
    from kcontract.check.runner import check
    f = tmp_path / "jk.py"
    f.write_text(JAX_KERNELS)
    run = check(f"{f}:sum", op="sum", dtype="float64", framework="jax",
                classes=["C-ORD-01", "C-ORD-02"])
    assert [r.verdict.value for r in run.results] == ["pass", "pass"], run.to_json()
    bad = check(f"{f}:sum_flips_precision", op="sum", dtype="float32", framework="jax",
                classes=["C-ORD-02"])
    r = bad.results[0]
    assert r.verdict.value == "error"
    assert "jax_default_matmul_precision" in r.message
