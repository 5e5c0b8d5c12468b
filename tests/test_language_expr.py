"""The expression sublanguage: parsing, static types, vectorised evaluation."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kcontract.errors import ContractError, SourceLocation
from kcontract.formats import FORMATS
from kcontract.language.expr import parse_expr
from kcontract.language.vocabulary import (CONSTANTS, FUNCTIONS, lambda_for, names_for,
                                           pgamma)

NAMES = {"out": "number", "ref": "number", "x": "number", "n": "int", "dtype": "format",
         "accumulate": "format", "nan": "string", "deterministic": "bool", "mask": "bool"}


def ev(src, **env):
    return parse_expr(src, names=NAMES).evaluate(env)


def err(src, kind=None, names=NAMES, **kw) -> ContractError:
    with pytest.raises(ContractError) as info:
        parse_expr(src, names=names, kind=kind, **kw)
    return info.value


# -- evaluation ---------------------------------------------------------------------

def test_arithmetic_and_precedence():
    assert ev("1 + 2 * 3") == 7
    assert ev("(1 + 2) * 3") == 9
    assert ev("-2 ** 2") == -4
    assert ev("2 ** -1") == 0.5
    assert ev("2 ** 3 ** 2") == 512
    assert ev("10 / 4 - 1e-1") == pytest.approx(2.4)
    assert ev("+3") == 3
    assert ev(".5 + 1.") == 1.5


def test_vectorised_with_broadcasting():
    out = np.arange(6.0).reshape(2, 3)
    ref = np.array([0.0, 1.0, 2.5])
    r = ev("abs(out - ref) <= 0.5", out=out, ref=ref)
    assert r.dtype == bool and r.shape == (2, 3)
    assert r.tolist() == [[True, True, True], [False, False, False]]


def test_inputs_of_any_float_dtype_are_upcast():
    import ml_dtypes
    x = np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16)
    r = ev("x * 2", x=x)
    assert r.dtype == np.float64 and r.tolist() == [3.0, -4.0]
    assert ev("x + 1", x=np.array([1, 2], dtype=np.int64)).tolist() == [2.0, 3.0]


def test_boolean_operators_are_elementwise():
    x = np.array([-1.0, 0.5, 2.0])
    assert ev("x > 0 and x < 1", x=x).tolist() == [False, True, False]
    assert ev("x < 0 or x > 1", x=x).tolist() == [True, False, True]
    assert ev("not (x > 0)", x=x).tolist() == [True, False, False]
    assert ev("not x > 0 and true", x=x).tolist() == [True, False, False]
    assert ev("x == 2 or x != x", x=x).tolist() == [False, False, True]


def test_reductions_give_scalars():
    x = np.array([[1.0, -4.0], [2.0, 3.0]])
    assert ev("max(x)", x=x) == 3.0 and ev("min(x)", x=x) == -4.0
    assert ev("sum(x)", x=x) == 2.0 and ev("mean(x)", x=x) == 0.5
    assert ev("rms(x)", x=x) == pytest.approx(math.sqrt(30 / 4))
    assert ev("count(x > 0)", x=x) == 3
    assert ev("all(x > -5)", x=x) is np.True_ or ev("all(x > -5)", x=x) == True  # noqa: E712
    assert not ev("any(x > 5)", x=x)
    assert np.isnan(ev("max(x)", x=np.array([1.0, np.nan])))
    assert ev("max(x)", x=np.array([])) == -np.inf
    assert ev("all(x > 0)", x=np.array([]))
    assert np.ndim(ev("max(x)", x=x)) == 0


def test_elementwise_functions():
    x = np.array([-2.5, 0.0, 4.0])
    assert ev("abs(x)", x=x).tolist() == [2.5, 0.0, 4.0]
    assert ev("sign(x)", x=x).tolist() == [-1.0, 0.0, 1.0]
    assert ev("floor(x)", x=x).tolist() == [-3.0, 0.0, 4.0]
    assert ev("ceil(x)", x=x).tolist() == [-2.0, 0.0, 4.0]
    assert ev("sqrt(abs(x))", x=x)[2] == 2.0
    assert ev("log2(x)", x=x)[2] == 2.0
    assert ev("exp(log(x))", x=x)[2] == pytest.approx(4.0)
    assert np.isnan(ev("sqrt(x)", x=x)[0])  # no warning, no exception
    assert ev("maximum(x, 0)", x=x).tolist() == [0.0, 0.0, 4.0]
    assert ev("minimum(x, 0)", x=x).tolist() == [-2.5, 0.0, 0.0]
    assert ev("where(x > 0, x, -x)", x=x).tolist() == [2.5, 0.0, 4.0]
    assert ev("where(x > 0, true, x < -1)", x=x).tolist() == [True, False, True]
    assert ev("pi") == math.pi and ev("inf") == math.inf


def test_exceptional_value_predicates():
    x = np.array([np.nan, np.inf, -np.inf, 1.0])
    assert ev("isnan(x)", x=x).tolist() == [True, False, False, False]
    assert ev("isinf(x)", x=x).tolist() == [False, True, True, False]
    assert ev("isfinite(x)", x=x).tolist() == [False, False, False, True]
    assert ev("isposinf(x)", x=x).tolist() == [False, True, False, False]
    assert ev("isneginf(x)", x=x).tolist() == [False, False, True, False]


def test_same_bits_semantics():
    a = np.array([np.nan, 0.0, -0.0, 1.0, np.inf, 1.0])
    b = np.array([np.nan, -0.0, -0.0, 1.0, np.inf, np.nextafter(1.0, 2.0)])
    r = ev("same_bits(out, ref)", out=a, ref=b)
    assert r.tolist() == [True, False, True, True, True, False]
    # ordinary equality differs exactly on NaN and signed zeros
    assert ev("out == ref", out=a, ref=b).tolist() == [False, True, True, True, True, False]


def test_format_functions():
    assert ev("u(float32)") == 2.0 ** -24
    assert ev("eps(bfloat16)") == 2.0 ** -7
    assert ev("tiny(float16)") == 2.0 ** -14
    assert ev("fmax(float8_e4m3fn)") == 448.0
    assert ev("subnormal_min(float16)") == 2.0 ** -24
    assert ev("precision(tfloat32)") == 11
    assert ev("u(dtype)", dtype=FORMATS["float16"]) == 2.0 ** -11
    assert ev("u(dtype)", dtype="bfloat16") == 2.0 ** -8  # a name is accepted too
    assert ev("dtype == float16", dtype="float16")
    assert ev("accumulate != dtype", dtype="float16", accumulate=FORMATS["float32"])


def test_ulp_uses_the_kernels_dtype_by_default():
    x = np.array([1.0, 3.0, 0.0])
    assert ev("ulp(x)", x=x, dtype="float32").tolist() == [2.0 ** -23, 2.0 ** -22, 2.0 ** -149]
    assert ev("ulp(x, bfloat16)", x=x).tolist() == [2.0 ** -7, 2.0 ** -6, 2.0 ** -133]
    assert parse_expr("ulp(x) > 0", names=NAMES).names == {"x", "dtype"}
    e = err("ulp(x)", names={"x": "number"})
    assert "without fmt uses 'dtype'" in e.message


def test_gamma_and_pgamma_values():
    u = 2.0 ** -24
    assert ev(f"gamma(1000, {u!r})") == pytest.approx(1000 * u / (1 - 1000 * u), rel=1e-15)
    assert ev("gamma(n, u(float16))", n=4096) == math.inf  # n u >= 1
    assert ev("gamma(n, u(float32))", n=np.array([1, 10])).shape == (2,)
    # pgamma: lambda solves 2n exp(-lambda^2 (1-u)^2 / 2) = p
    for n in (1, 100, 10 ** 6):
        lam = float(lambda_for(n, 1e-9, u))
        assert 2 * n * math.exp(-lam ** 2 * (1 - u) ** 2 / 2) == pytest.approx(1e-9, rel=1e-9)
        want = math.expm1(lam * math.sqrt(n) * u + n * u * u / (1 - u))
        assert ev(f"pgamma({n}, u(float32))") == pytest.approx(want, rel=1e-12)
    # the probabilistic bound is far below the worst case for long sums
    assert ev("pgamma(n, u(float32)) < gamma(n, u(float32)) / 50", n=10 ** 6)
    # a looser failure probability gives a tighter bound
    assert ev("pgamma(1000, u(float32), 1e-3) < pgamma(1000, u(float32))")
    assert float(pgamma(0, u)) == 0.0


def test_round_convert_and_subnormals():
    x = np.array([1.0 + 2.0 ** -9, 70000.0, -1e6, 1e-6])
    r = ev("round(x, bfloat16)", x=x)
    assert r[0] == 1.0  # ties to even
    assert ev("round(x, float16)", x=x)[1] == np.inf
    assert np.isnan(ev("round(x, float8_e4m3fn)", x=x)[1])  # no infinities: NaN
    assert ev("convert(x, float16, 'saturate')", x=x)[1:3].tolist() == [65504.0, -65504.0]
    assert ev("convert(x, float16, 'inf')", x=x)[1:3].tolist() == [np.inf, -np.inf]
    assert ev("convert(x, float8_e4m3fn, 'inf')", x=x)[2] == -np.inf
    assert np.isnan(ev("convert(x, float16, 'nan')", x=x)[1])
    assert ev("convert(x, float16, 'nan')", x=x)[0] == 1.0 + 2.0 ** -9  # representable
    assert ev("is_subnormal(x, float16)", x=x).tolist() == [False, False, False, True]
    assert ev("convert(x, float16, nan)", x=x, nan="saturate")[1] == 65504.0
    with pytest.raises(ContractError, match="must be one of 'inf', 'nan', 'saturate'"):
        ev("convert(x, float16, nan)", x=x, nan="propagate")


def test_strings_and_claims():
    assert ev("nan == 'propagate'", nan="propagate")
    assert ev('nan != "mask"', nan="propagate")
    assert ev("deterministic and true", deterministic=True)
    # with no names in scope, nan is the constant
    assert np.isnan(parse_expr("nan").evaluate({}))


def test_results_and_names():
    e = parse_expr("abs(out - ref) <= 2 * u(accumulate) * n", names=NAMES, kind="bool")
    assert e.type == "bool"
    assert e.names == {"out", "ref", "accumulate", "n"}
    assert isinstance(ev("1 < 2"), np.bool_)
    assert isinstance(ev("1 + 1"), np.float64)


# -- static errors --------------------------------------------------------------------

@pytest.mark.parametrize("src,col,fragment", [
    ("u(bfloat61)", 3, "unknown name 'bfloat61' (did you mean bfloat16?)"),
    ("u(bf16)", 3, "unknown name 'bf16' (did you mean bfloat16?)"),
    ("abs(out - reff)", 11, "unknown name 'reff' (did you mean ref?)"),
    ("sqr(out)", 1, "unknown function 'sqr' (did you mean sqrt?)"),
    ("out(1)", 1, "'out' is not a function"),
    ("abs", 1, "'abs' is a function: call it as abs(x)"),
    ("maximum(out)", 1, "maximum(a, b) takes 2 arguments, got 1"),
    ("ulp(out, float32, 1)", 1, "ulp(x[, fmt]) takes 1 or 2 arguments, got 3"),
    ("1 + u(abs(out))", 7, "argument 1 (fmt) of u(fmt) must be a format, but 'abs(out)' is a number"),
    ("abs(float32)", 5, "argument 1 (x) of abs(x) must be a number, but 'float32' is a format"),
    ("dtype == 1", 7, "cannot compare a format with a number"),
    ("dtype < float32", 7, "'<' orders numbers"),
    ("out + (ref > 1)", 7, "operand of '+' must be a number, but '(ref > 1)' is a boolean"),
    ("out > 1 and 2", 13, "operand of 'and' must be a boolean"),
    ("not out", 5, "operand of 'not' must be a boolean"),
    ("-dtype", 2, "operand of unary '-' must be a number"),
    ("where(out > 0, out, dtype)", 21, "must be a number or a boolean"),
    ("count(out)", 7, "must be a boolean, but 'out' is a number"),
    ("convert(out, float16, 'clamp')", 23, "must be one of 'inf', 'nan', 'saturate'"),
    ("nan == 'propogate'", 8, "claim nan is never 'propogate'"),
    ("abs(out - ref <= 1", 19, "unexpected end of expression; expected one of: ')', ','"),
    ("abs(out - ref) <= ", 18, "unexpected end of expression; expected one of: a number"),
    ("out <= * 2", 8, "unexpected '*'; expected one of:"),
    ("(out))", 6, "unexpected ')' (no matching '(')"),
    ("0 < out < 1", 9, "comparisons do not chain"),
    ("out && ref", 5, "unexpected character '&' (write 'and')"),
    ("out = ref", 5, "(write '==' to compare)"),
    ("out <= 'abc", 8, "unterminated string"),
    ("  ", 1, "expression is empty"),
])
def test_static_errors(src, col, fragment):
    e = err(src)
    assert fragment in e.message
    assert (e.location.line, e.location.col) == (1, col), e.render()


def test_kind_errors():
    e = err("abs(out - ref)", kind="bool", what="postcondition")
    assert e.message.startswith("postcondition must be boolean") and e.location.col == 1
    e = err("out > 1", kind="number", what="tolerance 'atol'")
    assert e.message == "tolerance 'atol' must be a number, but this is a boolean"
    assert parse_expr("n", names=NAMES, kind="number").type == "int"  # int is a number


def test_pending_names():
    e = err("atol * 2", pending={"atol": "is defined later"})
    assert e.message == "'atol' is defined later"


def test_location_is_offset_into_the_file():
    loc = SourceLocation("c.yaml", 7, 12, "  atol: 4 * u(bfloat61)")
    with pytest.raises(ContractError) as info:
        parse_expr("4 * u(bfloat61)", names=NAMES, location=loc)
    e = info.value
    assert str(e.location) == "c.yaml:7:18"
    assert e.render().splitlines()[0] == "c.yaml:7:18: unknown name 'bfloat61' (did you mean bfloat16?)"
    assert e.render().splitlines()[2] == "    " + " " * 17 + "^"
    # a multi-line source: the line and column within it
    with pytest.raises(ContractError) as info:
        parse_expr("abs(out)\n  <= bogus", names=NAMES, location=loc)
    assert (info.value.location.line, info.value.location.col) == (8, 6)


# -- evaluation errors -----------------------------------------------------------------

def test_broadcast_error_points_at_the_operator():
    loc = SourceLocation("c.yaml", 3, 16, "postcondition: out + ref <= 1")
    e = parse_expr("out + ref <= 1", names=NAMES, location=loc)
    with pytest.raises(ContractError) as info:
        e.evaluate({"out": np.zeros((3, 4)), "ref": np.zeros(5)})
    assert info.value.message == "operands of '+' have shapes (3,4) and (5,) that do not broadcast"
    assert (info.value.location.line, info.value.location.col) == (3, 20)
    f = parse_expr("maximum(out, ref)", names=NAMES)
    with pytest.raises(ContractError, match="arguments of 'maximum' have shapes"):
        f.evaluate({"out": np.zeros((3, 4)), "ref": np.zeros(5)})


def test_unbound_name_at_evaluation():
    e = parse_expr("out > 1", names=NAMES)
    with pytest.raises(ContractError, match="name 'out' has no value"):
        e.evaluate({})


# -- the vocabulary ---------------------------------------------------------------------

def test_names_for_an_op():
    names = names_for("matmul")
    assert names["out"] == names["ref"] == "number" and names["dtype"] == "format"
    assert names["n"] == "int" and names["K"] == "int"
    assert names["a"] == names["b"] == names["mag"] == "number"
    assert names["accumulate"] == "format" and names["deterministic"] == "bool"
    assert names["nan"] == names["oob"] == "string"
    assert all(names[f] == "format" for f in FORMATS)
    ln = names_for("layernorm")
    assert ln["kappa"] == "number" and ln["weight"] == "number"


def test_every_function_is_documented_and_callable():
    for name, fn in FUNCTIONS.items():
        assert fn.doc and fn.signature.startswith(name + "(")
    assert set(CONSTANTS) == {"pi", "inf", "nan", "true", "false"}
