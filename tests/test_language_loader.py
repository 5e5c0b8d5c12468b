"""Loading contract files: positions of every error, the parsed model, the JSON Schema."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from kcontract.errors import ContractError, UsageError
from kcontract.formats import FORMATS, KERNEL_DTYPES
from kcontract.check.verdict import Diagnosis
from kcontract.language import (contract_schema, load_check_file, load_check_text,
                                load_contract_text, load_contracts, registry)
from kcontract.language.vocabulary import CLASS_IDS, FUNCTIONS, registered_protocols

ROOT = Path(__file__).resolve().parents[1]
MALFORMED = sorted((Path(__file__).parent / "malformed").glob("*.yaml"))
SUITE = sorted((ROOT / "src" / "kcontract" / "suite" / "contracts").glob("*.yaml"))
DOC = ROOT / "docs" / "language.md"

# Test-only vocabulary, registered next to whatever kcontract.classes registers.
registered_protocols()
registry.protocol("kctest_sweep", params={"max_n": (int, 64), "scale": (float, 1.0),
                                          "mode": (str, "fast"), "sizes": (tuple, (1, 2))},
                  provides=("bound_est",))(lambda ctx: None)
registry.detector("kctest_detector")(lambda ctx, evidence: Diagnosis())

BASE = """\
id: test/matmul-bound
class: C-PRC-01
title: matmul within the accumulate bound
scope:
  op: matmul
  dtypes: [float32, bfloat16]
tolerance:
  atol: 4 * u(dtype)
  bound: gamma(n, u(accumulate)) * mag + atol
postcondition: abs(out - ref) <= bound
oracle: fp64
protocol:
  kind: kctest_sweep
  families: [normal, offset]
  shapes:
    - {M: 3, K: 64, N: 5}
signature:
  code: PRC-01/too-loose
  summary: error above the declared-accumulator bound
"""


def _expectation(path: Path) -> tuple[int, int, str]:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    m = re.match(r"# expect: (\d+):(\d+): (.+)$", first)
    assert m, f"{path.name}: the first line must be '# expect: LINE:COL: message'"
    return int(m.group(1)), int(m.group(2)), m.group(3)


def test_enough_malformed_files():
    assert len(MALFORMED) >= 25


@pytest.mark.parametrize("path", MALFORMED, ids=lambda p: p.stem)
def test_malformed_contract(path: Path):
    line, col, fragment = _expectation(path)
    with pytest.raises(ContractError) as info:
        load_contracts(path)
    e = info.value
    assert e.location is not None
    assert (e.location.file, e.location.line, e.location.col) == (str(path), line, col), e.render()
    assert fragment in e.message, e.render()
    rendered = e.render()
    assert rendered.startswith(f"{path}:{line}:{col}: ")
    if e.location.text:  # the caret sits under the offending column
        src_line = path.read_text(encoding="utf-8").split("\n")[line - 1]
        assert e.location.text == src_line
        assert rendered.splitlines()[2] == "    " + " " * (col - 1) + "^"


# -- what a valid file becomes ----------------------------------------------------------

def test_single_contract():
    [c] = load_contract_text(BASE, "base.yaml")
    assert (c.id, c.cls, c.op, c.oracle) == ("test/matmul-bound", "C-PRC-01", "matmul", "fp64")
    assert c.scope.dtypes == ("float32", "bfloat16")
    assert tuple(c.scope.frameworks) == ("numpy", "torch", "jax") and dict(c.scope.requires) == {}
    assert list(c.tolerance) == ["atol", "bound"]
    assert c.protocol.kind == "kctest_sweep" and c.protocol.seed == 0 and c.protocol.trials == 1
    assert c.protocol.families == ("normal", "offset")
    assert c.protocol.shapes == ({"M": 3, "K": 64, "N": 5},)
    assert c.protocol.params == {"max_n": 64, "scale": 1.0, "mode": "fast", "sizes": (1, 2)}
    assert c.signature.code == "PRC-01/too-loose" and c.signature.detector is None
    assert c.claims == ("accumulate",)  # read by the tolerance
    assert c.source == "base.yaml" and (c.location.line, c.location.col) == (1, 1)
    assert c.applies_to("matmul", "bfloat16", "torch")
    assert (c.tolerance["bound"].location.line, c.tolerance["bound"].location.col) == (9, 10)
    assert (c.postcondition.location.line, c.postcondition.location.col) == (10, 16)


def test_expressions_evaluate_in_order():
    [c] = load_contract_text(BASE)
    env = {"out": np.array([1.0, 2.0]), "ref": np.array([1.0, 2.0 + 1e-3]), "n": 64,
           "dtype": FORMATS["float32"], "accumulate": FORMATS["float32"],
           "mag": np.array([1.0, 2.0])}
    for name, e in c.tolerance.items():
        env[name] = e.evaluate(env)
    assert env["atol"] == 4 * 2.0 ** -24
    assert c.postcondition.evaluate(env).tolist() == [True, False]


def test_all_optional_parts():
    text = BASE.replace("oracle: fp64\n", """\
oracle: fp64
description: the long story
claims: [deterministic, accumulate]
precondition: all(isfinite(a)) and max(abs(b)) < 1e4 and K >= 1
""").replace("  dtypes: [float32, bfloat16]\n", """\
  dtypes: [float32, bfloat16, float32]
  frameworks: [torch]
  requires:
    accumulate: float32
    deterministic: true
    nan: propagate
""").replace("  kind: kctest_sweep\n", """\
  kind: kctest_sweep
  seed: 3
  trials: 4
  params:
    max_n: 128
    scale: 2
    sizes: [3, 4]
""").replace("  summary: error above the declared-accumulator bound\n", """\
  summary: error above the declared-accumulator bound
  detector: kctest_detector
""").replace("postcondition: abs(out - ref) <= bound", "postcondition: abs(out - ref) <= bound + bound_est")
    [c] = load_contract_text(text)
    assert c.description == "the long story"
    assert c.scope.dtypes == ("float32", "bfloat16") and c.scope.frameworks == ("torch",)
    assert c.scope.requires == {"accumulate": FORMATS["float32"], "deterministic": True,
                                "nan": "propagate"}
    assert c.claims == ("deterministic", "accumulate", "nan")
    assert c.precondition is not None and c.precondition.names == {"a", "b", "K"}
    assert (c.protocol.seed, c.protocol.trials) == (3, 4)
    assert c.protocol.params["scale"] == 2.0 and isinstance(c.protocol.params["scale"], float)
    assert c.protocol.params["sizes"] == (3, 4)
    assert c.signature.detector == "kctest_detector"
    assert "bound_est" in c.postcondition.names  # provided by the protocol


def test_precondition_cannot_read_out_or_tolerances():
    text = BASE.replace("oracle: fp64\n", "oracle: fp64\nprecondition: max(abs(out)) < 1\n")
    with pytest.raises(ContractError, match="the precondition selects inputs before the kernel"):
        load_contract_text(text)
    text = BASE.replace("oracle: fp64\n", "oracle: fp64\nprecondition: atol < 1\n")
    with pytest.raises(ContractError, match="'atol' is a tolerance"):
        load_contract_text(text)


def test_list_form_and_run_keys(tmp_path):
    body = "".join("  - " + BASE.replace("test/matmul-bound", f"test/c{i}")
                   .replace("\n", "\n    ").rstrip() + "\n" for i in range(2))
    text = ("kernel: my_kernels.py:matmul\ndtype: bfloat16\nframework: torch\ndevice: cuda:0\n"
            "declare:\n  accumulate: float16\n  deterministic: false\ncontracts:\n" + body)
    f = tmp_path / "check.yaml"
    f.write_text(text)
    spec = load_check_file(f)
    assert [c.id for c in spec.contracts] == ["test/c0", "test/c1"]
    assert (spec.kernel, spec.dtype, spec.framework, spec.device) == (
        "my_kernels.py:matmul", "bfloat16", "torch", "cuda:0")
    assert dict(spec.declare) == {"accumulate": "float16", "deterministic": False}
    assert spec.source == str(f)
    assert [c.id for c in load_contracts(f)] == ["test/c0", "test/c1"]
    assert spec.contracts[1].location.line == 28


def test_single_form_with_run_keys():
    spec = load_check_text("kernel: mod:fn\n" + BASE)
    assert spec.kernel == "mod:fn" and spec.framework == "numpy" and spec.device == "cpu"
    assert spec.dtype is None and dict(spec.declare) == {}


def test_missing_file():
    with pytest.raises(UsageError, match="no such contract file"):
        load_contracts("does/not/exist.yaml")


def test_expression_scalars_of_every_yaml_style():
    # numbers and booleans are expressions too
    text = BASE.replace("  atol: 4 * u(dtype)", "  atol: 0").replace(
        "postcondition: abs(out - ref) <= bound", "postcondition: true")
    [c] = load_contract_text(text)
    assert c.tolerance["atol"].evaluate({}) == 0.0 and c.postcondition.evaluate({})


@pytest.mark.parametrize("value,line,col", [
    ('"abs(out - ref) <= bond"', 10, 35),
    ("'abs(out - ref) <= bond'", 10, 35),
    ("|\n  abs(out - ref)\n    <= bond", 12, 8),
    (">\n  abs(out - ref)\n  <= bond", 12, 6),
    ("abs(out - ref)\n  <= bond", 11, 6),  # a plain multi-line scalar
    ('"abs(out - ref) \\\n  <= bond"', 11, 6),
])
def test_columns_inside_yaml_scalars(value, line, col):
    text = BASE.replace("postcondition: abs(out - ref) <= bound", "postcondition: " + value)
    with pytest.raises(ContractError) as info:
        load_contract_text(text, "s.yaml")
    loc = info.value.location
    assert (loc.line, loc.col) == (line, col), info.value.render()
    assert loc.text[col - 1:col + 3] == "bond"


# -- the taxonomy and the documentation ----------------------------------------------------

def test_class_ids_match_the_taxonomy():
    from kcontract.classes import taxonomy
    assert tuple(taxonomy.CLASSES) == CLASS_IDS


def _doc_block(marker: str) -> str:
    m = re.search(rf"<!-- example: {marker} -->\n```(?:yaml)?\n(.*?)```", DOC.read_text(), re.S)
    assert m, f"docs/language.md has no '{marker}' example"
    return m.group(1)


def test_doc_example_loads_and_its_error_is_as_shown():
    assert "compare" in registered_protocols()
    text = _doc_block("check-file")
    spec = load_check_text(text, "acme_matmul.contract.yaml")
    assert spec.kernel and spec.dtype == "bfloat16"
    [c] = spec.contracts
    assert c.op == "matmul" and list(c.tolerance) == ["acc", "tol"]
    contract_schema_validate(yaml.safe_load(text))
    with pytest.raises(ContractError) as info:
        load_check_text(text.replace("u(accumulate)", "u(bfloat61)"), "acme_matmul.contract.yaml")
    assert info.value.render() + "\n" == _doc_block("error")


def test_doc_lists_every_function():
    doc = DOC.read_text()
    for name in FUNCTIONS:
        assert f"`{name}(" in doc, name


# -- the JSON Schema ----------------------------------------------------------------------

def contract_schema_validate(instance) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator(contract_schema()).validate(instance)


def test_schema_is_valid_and_generated_from_the_tables():
    jsonschema = pytest.importorskip("jsonschema")
    schema = contract_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    props = schema["$defs"]["contract"]["properties"]
    assert props["class"]["enum"] == list(CLASS_IDS)
    assert props["scope"]["properties"]["dtypes"]["items"]["enum"] == list(KERNEL_DTYPES)
    assert "kctest_sweep" in props["protocol"]["properties"]["kind"]["enum"]
    assert "kctest_detector" in props["signature"]["properties"]["detector"]["enum"]


def test_schema_accepts_valid_files():
    contract_schema_validate(yaml.safe_load(BASE))
    contract_schema_validate(yaml.safe_load("kernel: m:f\ndtype: float32\n" + BASE))
    contract_schema_validate({"contracts": [yaml.safe_load(BASE)], "framework": "torch"})


@pytest.mark.parametrize("edit", [
    lambda d: d.update(oracle="fp46"),
    lambda d: d.pop("postcondition"),
    lambda d: d.update(postconditon="true"),
    lambda d: d["scope"].update(dtypes="float32"),
    lambda d: d["scope"].update(op="matmull"),
    lambda d: d["protocol"].update(trials=0),
    lambda d: d["protocol"].update(params={"max_nn": 3}),
    lambda d: d["protocol"].update(params={"max_n": "lots"}),
    lambda d: d["protocol"]["shapes"][0].update(Q=3),
    lambda d: d["scope"].update(requires={"nan": "propogate"}),
    lambda d: d.update(id="-bad id"),
])
def test_schema_rejects_what_the_loader_rejects(edit):
    jsonschema = pytest.importorskip("jsonschema")
    doc = yaml.safe_load(BASE)
    edit(doc)
    with pytest.raises(jsonschema.ValidationError):
        contract_schema_validate(doc)
    with pytest.raises(ContractError):
        load_contract_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.parametrize("path", SUITE, ids=lambda p: p.stem)
def test_suite_files_validate_against_the_schema(path: Path):
    assert len(SUITE) >= 52
    contract_schema_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
