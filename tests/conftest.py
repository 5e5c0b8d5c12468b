"""Shared test set-up: runs never write into the user's results store."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
KERNELS = TESTS / "kernels"


def pytest_configure(config):
    # `make test` sets this: there the tests that need torch must run, never be skipped
    if os.environ.get("KCONTRACT_REQUIRE_TORCH"):
        try:
            import torch  # noqa: F401
        except ImportError as exc:
            raise pytest.UsageError(f"KCONTRACT_REQUIRE_TORCH is set but torch does not import: {exc}")
    # and the compiled helper must be built, from the current source: the extension is
    # optional, so a build that fails leaves no module (its tests would skip) or, in a
    # working tree, the previous build in place
    if os.environ.get("KCONTRACT_REQUIRE_HELPER"):
        try:
            from kcontract.freivalds import _fastc
        except ImportError as exc:
            raise pytest.UsageError(
                f"KCONTRACT_REQUIRE_HELPER is set but the compiled helper does not import: {exc}")
        src = Path(_fastc.__file__).parent / "_fastc.c"
        if src.exists() and src.stat().st_mtime > Path(_fastc.__file__).stat().st_mtime:
            raise pytest.UsageError("the compiled helper is older than its source: it did not "
                                    "build (run `python setup.py build_ext --inplace` to see why)")


@pytest.fixture(autouse=True, scope="session")
def _isolated_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "results.db"
    old = os.environ.get("KCONTRACT_STORE")
    os.environ["KCONTRACT_STORE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("KCONTRACT_STORE", None)
    else:
        os.environ["KCONTRACT_STORE"] = old


@pytest.fixture(autouse=True, scope="session")
def _isolated_signing_key(tmp_path_factory):
    """Certificates and stored runs are signed with a key of the test session's own."""
    path = tmp_path_factory.mktemp("keys") / "signing.key"
    old = os.environ.get("KCONTRACT_KEY")
    os.environ["KCONTRACT_KEY"] = str(path)
    yield path
    if old is None:
        os.environ.pop("KCONTRACT_KEY", None)
    else:
        os.environ["KCONTRACT_KEY"] = old


def kernel(file: str, fn: str) -> str:
    """A kernel spec for a file under tests/kernels."""
    return f"{KERNELS / file}:{fn}"


@pytest.fixture
def run_cli():
    """Run the CLI in-process (click's runner) and return (exit code, stdout, stderr)."""
    from click.testing import CliRunner
    from kcontract.cli import main

    def _run(*args):
        runner = CliRunner()
        res = runner.invoke(main, [str(a) for a in args], catch_exceptions=False)
        return res.exit_code, res.stdout, res.stderr
    return _run
