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
