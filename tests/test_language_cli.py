"""Contract-file errors on the command line: ``file:line:col`` and exit status 2."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from click.testing import CliRunner

from kcontract import cli

from kcontract.check.verdict import Diagnosis
from kcontract.language import contract_schema, registry
from kcontract.language.vocabulary import registered_protocols

MALFORMED = Path(__file__).parent / "malformed"

registered_protocols()
registry.protocol("kctest_sweep", params={"max_n": (int, 64), "scale": (float, 1.0),
                                          "mode": (str, "fast"), "sizes": (tuple, (1, 2))},
                  provides=("bound_est",))(lambda ctx: None)
registry.detector("kctest_detector")(lambda ctx, evidence: Diagnosis())


def _run(*args):
    return CliRunner().invoke(cli.main, list(args))


@pytest.mark.parametrize("name,where", [
    ("dtype_typo_expr.yaml", "9:15: unknown name 'bfloat61' (did you mean bfloat16?)"),
    ("yaml_syntax_error.yaml", "8:10: YAML syntax error"),
    ("empty_file.yaml", "1:1: empty contract file"),
])
def test_check_of_a_malformed_file_exits_2(name, where):
    path = MALFORMED / name
    r = _run("check", str(path))
    assert r.exit_code == 2, r.output
    assert f"{path}:{where}" in r.output


def test_check_file_without_kernel_exits_2(tmp_path):
    text = (MALFORMED / "unknown_op.yaml").read_text().replace("op: matmull", "op: matmul")
    f = tmp_path / "nokernel.yaml"
    f.write_text(text)
    r = _run("check", str(f))
    assert r.exit_code == 2 and "names no kernel" in r.output


def test_schema_command_prints_the_schema():
    r = _run("schema")
    assert r.exit_code == 0
    assert json.loads(r.output) == json.loads(json.dumps(contract_schema()))
