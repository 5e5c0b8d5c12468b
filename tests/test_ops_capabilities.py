"""Per-op knowledge lives in ops/: no code outside it branches on an op's name, and a
protocol whose op lacks a capability says which in a skipped verdict."""
import ast
from pathlib import Path

import numpy as np

from kcontract.ops import OPS, get_op
from kcontract.ops.base import Lacks, Op, Reorder

PKG = Path(__file__).parents[1] / "src" / "kcontract"
OP_NAMES = set(OPS)


def _sources(where):
    for path in sorted(where.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] == "ops" or rel.parts[:2] == ("suite", "kernels"):
            continue
        yield rel, ast.parse(path.read_text(), str(path))


def _mentions_op(node) -> bool:
    """An expression that is an op or its name: ``op``, ``ctx.op``, ``op.name``, ``op_name``."""
    src = ast.unparse(node)
    return src in ("op", "name", "op_name") or src.endswith((".op", "op.name", ".op.name"))


def _op_name_constants(node):
    """String constants among a comparison's operands (tuples, lists, sets included)."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and n.value in OP_NAMES]


def test_no_file_under_classes_names_an_op():
    """No string constant under classes/ is the name of an op (docstrings aside)."""
    found = []
    for rel, tree in _sources(PKG / "classes"):
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and n.value in OP_NAMES and id(n) not in docs:
                found.append(f"{rel}:{n.lineno}: {n.value!r}")
    assert not found, "op names under classes/:\n" + "\n".join(found)


def test_nothing_outside_ops_compares_an_op_name():
    """No comparison anywhere outside ops/ of an op (or its name) with an op's name,
    ``op.name == "matmul"`` or ``ctx.op.name in ("softmax", ...)``."""
    found = []
    for rel, tree in _sources(PKG):
        for n in ast.walk(tree):
            if not isinstance(n, ast.Compare):
                continue
            sides = [n.left, *n.comparators]
            if any(_mentions_op(s) for s in sides) and any(_op_name_constants(s) for s in sides):
                found.append(f"{rel}:{n.lineno}: {ast.unparse(n)}")
            if any(isinstance(s, ast.Attribute) and s.attr == "name" and "op" in ast.unparse(s)
                   for s in sides) and any(isinstance(s, (ast.Constant, ast.Tuple, ast.List))
                                           for s in sides):
                found.append(f"{rel}:{n.lineno}: {ast.unparse(n)}")
    assert not found, "comparisons on op names outside ops/:\n" + "\n".join(found)


def test_the_grep_finds_what_it_should(tmp_path):
    """The checks above are not vacuous: the patterns they forbid are recognised."""
    tree = ast.parse('if ctx.op.name == "matmul": pass\nif op in ("softmax", "gelu"): pass')
    cmps = [n for n in ast.walk(tree) if isinstance(n, ast.Compare)]
    assert all(any(_mentions_op(s) for s in [c.left, *c.comparators]) for c in cmps)
    assert _op_name_constants(cmps[1].comparators[0]) == ["softmax", "gelu"]


def test_lacks_is_falsy_and_names_the_capability():
    lack = Lacks("reorder", "no axes")
    assert not lack
    assert lack.message("myop") == "op 'myop' does not declare the capability 'reorder': no axes"


def test_builtin_capabilities():
    assert get_op("matmul").reorder({}) == Reorder({"a": -1, "b": -2}, None)
    assert isinstance(get_op("attention").reorder({"causal": True}), Lacks)
    assert isinstance(get_op("gelu").reorder({}), Lacks)
    assert get_op("softmax").reorder({}).output_axis == -1
    assert get_op("embedding").gather.indices == "indices"
    assert get_op("matmul").exceptional_targets() == ("a", "b")
    assert get_op("sum").exceptional_targets() == ("x",)
    # softmax probes subnormal outputs only: exp of a subnormal logit is 1 either way
    assert get_op("softmax").subnormal_inputs({"R": 2, "N": 4}, "float32", "inputs", None) is None
    assert isinstance(get_op("embedding").subnormal_inputs({"V": 4, "D": 2, "N": 3}, "float32",
                                                            "inputs", None), Lacks)


def test_dependence_from_the_symbols():
    mm, sm, s, g = get_op("matmul"), get_op("softmax"), get_op("sum"), get_op("gelu")
    assert mm.depends_on("a", (2, 5), (2, 0)) and not mm.depends_on("a", (2, 5), (3, 0))
    assert mm.depends_on("b", (5, 1), (7, 1)) and not mm.depends_on("b", (5, 1), (7, 2))
    assert sm.depends_on("x", (1, 3), (1, 0)) and not sm.depends_on("x", (1, 3), (2, 3))
    assert s.depends_on("x", (4, 9), (4,)) and not s.depends_on("x", (4, 9), (3,))
    assert g.depends_on("x", (1, 2), (1, 2)) and not g.depends_on("x", (1, 2), (1, 3))


def test_one_attention_formula():
    from kcontract.ops.attention import attend
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 3, 4)) for _ in range(3))
    op = get_op("attention")
    np.testing.assert_allclose(op.oracle({"q": q, "k": k, "v": v}), attend(q, k, v), rtol=0, atol=0)
    labels = [lbl for lbl, _ in op.emulations({"q": q, "k": k, "v": v}, "bfloat16")]
    assert labels == ["operands", "operands and probabilities"]


def test_every_builtin_op_is_an_op_with_its_capabilities_listed():
    for op in OPS.values():
        assert isinstance(op, Op)
        caps = op.capabilities()
        assert set(caps) >= {"reorder", "batch_rows", "fingerprint", "overflow_inputs"}
