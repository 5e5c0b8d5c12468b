"""The vocabulary of the expression language: types, functions, constants and names.

Everything an expression can refer to is one row of a table here, so the
type checker (:mod:`.expr`), the loader, the JSON Schema and the documentation
read the same facts.

Types
    ``number``  a float64 scalar or array (broadcasting as numpy does)
    ``int``     a shape symbol or the reduction length ``n``; usable as a number
    ``bool``    a boolean scalar or array (``and``/``or``/``not`` are elementwise)
    ``format``  a floating-point format (``float32``, ``dtype``, ``accumulate``)
    ``string``  a string literal or a string-valued claim (``nan``, ``oob``, ...)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from .. import formats as _formats
from .claims import CLAIMS
from ..errors import UsageError, did_you_mean
from ..formats import FORMATS, Format

NUMBER, INT, BOOL, FORMAT, STRING = "number", "int", "bool", "format", "string"

#: the taxonomy's class IDs a contract's ``class`` must be one of
CLASS_IDS = ("C-PRC-01", "C-PRC-02", "C-PRC-03", "C-PRC-04",
             "C-ORD-01", "C-ORD-02", "C-ORD-03",
             "C-CMP-01", "C-CMP-02", "C-CMP-03",
             "C-EXC-01", "C-EXC-02")

#: overflow policies ``convert(x, fmt, policy)`` accepts
OVERFLOW_POLICIES = ("inf", "nan", "saturate")

#: default failure probability of the probabilistic bound ``pgamma(n, u)``
DEFAULT_PGAMMA_P = 1e-9


def describe_type(t: str) -> str:
    return {NUMBER: "a number", INT: "an integer", BOOL: "a boolean", FORMAT: "a format",
            STRING: "a string"}.get(t, t)


# -- numerics of the functions --------------------------------------------------

def lambda_for(n, p: float = DEFAULT_PGAMMA_P, u: float = 0.0):
    """The lambda of Higham & Mary's probabilistic bound: the value with
    ``2 n exp(-lambda**2 (1 - u)**2 / 2) = p``, i.e. the bound holds with
    probability at least ``1 - p``.  Vectorised over ``n``; 0 where ``2n <= p``."""
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        arg = np.log(np.where(n > 0, 2.0 * n, 1.0) / p)
    return np.sqrt(2.0 * np.maximum(arg, 0.0)) / (1.0 - u)


def pgamma(n, u, p=DEFAULT_PGAMMA_P):
    """Higham & Mary's probabilistic gamma: ``exp(lambda sqrt(n) u + n u**2/(1-u)) - 1``
    with ``lambda = lambda_for(n, p, u)``; a bound on the relative error of an
    n-term sum/inner product that holds with probability at least ``1 - p``
    (rounding errors modelled as independent, mean zero)."""
    n = np.maximum(np.asarray(n, dtype=np.float64), 0.0)
    u = np.asarray(u, dtype=np.float64)
    p = float(np.asarray(p))
    lam = lambda_for(n, p, u)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.expm1(lam * np.sqrt(n) * u + n * u * u / (1.0 - u))


def same_bits(a, b):
    """Bitwise equality of values that came from the same format: equal values
    with equal sign bits (+0 and -0 differ), and NaN equals NaN (payloads are not
    compared: inputs are float64 upcasts, in which payloads are not preserved)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        eq = (a == b) & (np.signbit(a) == np.signbit(b))
    return eq | (np.isnan(a) & np.isnan(b))


def convert(x, fmt: Format, policy: str):
    """Round ``x`` into ``fmt`` (RNE); finite values beyond the format's range become
    +-inf (``'inf'``), NaN (``'nan'``) or +-max (``'saturate'``)."""
    x = np.asarray(x, dtype=np.float64)
    r = _formats.round_to(x, fmt)
    with np.errstate(invalid="ignore"):
        over = np.isfinite(x) & ~np.isfinite(r)
    if policy == "inf":
        repl = np.copysign(np.inf, x)
    elif policy == "nan":
        repl = np.full_like(x, np.nan)
    else:
        repl = np.copysign(fmt.max, x)
    return np.where(over, repl, r)


def ulp(x, fmt: Format):
    """:func:`kcontract.formats.ulp`, with ulp(0) the smallest subnormal (the spacing there)."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x == 0, fmt.smallest_subnormal, _formats.ulp(x, fmt))


def _reduce(fn, empty):
    def run(x):
        x = np.asarray(x)
        return empty if x.size == 0 else fn(x)
    return run


def _rms(x):
    x = np.asarray(x, dtype=np.float64)
    return np.nan if x.size == 0 else np.sqrt(np.mean(x * x))


# -- the function table -----------------------------------------------------------

@dataclass(frozen=True)
class Param:
    name: str
    type: str  # a type, "number|bool", or "T" (a type variable: number or bool, all T agree)
    #: default for an optional parameter: ("value", v) a constant, ("name", n) an env name
    default: Optional[tuple] = None
    #: the values a string parameter accepts (checked statically for literals)
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Function:
    name: str
    params: tuple[Param, ...]
    returns: str  # a type, or "T"
    impl: Callable[..., Any]
    doc: str

    @property
    def min_args(self) -> int:
        return sum(1 for p in self.params if p.default is None)

    @property
    def signature(self) -> str:
        req = [p.name for p in self.params if p.default is None]
        opt = [p.name for p in self.params if p.default is not None]
        s = ", ".join(req)
        for o in opt:
            s += f"[, {o}]"
        return f"{self.name}({s})"


def _P(name, type_, default=None, choices=()):
    return Param(name, type_, default, tuple(choices))


_X = _P("x", NUMBER)
_F = _P("fmt", FORMAT)
FUNCTIONS: dict[str, Function] = {f.name: f for f in [
    Function("abs", (_X,), NUMBER, np.abs, "absolute value, elementwise"),
    Function("sqrt", (_X,), NUMBER, np.sqrt, "square root, elementwise (NaN below 0)"),
    Function("exp", (_X,), NUMBER, np.exp, "e**x, elementwise"),
    Function("log", (_X,), NUMBER, np.log, "natural logarithm, elementwise"),
    Function("log2", (_X,), NUMBER, np.log2, "base-2 logarithm, elementwise"),
    Function("sign", (_X,), NUMBER, np.sign, "-1, 0 or 1 (NaN for NaN), elementwise"),
    Function("floor", (_X,), NUMBER, np.floor, "largest integer <= x, elementwise"),
    Function("ceil", (_X,), NUMBER, np.ceil, "smallest integer >= x, elementwise"),
    Function("maximum", (_P("a", NUMBER), _P("b", NUMBER)), NUMBER, np.maximum,
             "elementwise maximum of a and b (NaN propagates)"),
    Function("minimum", (_P("a", NUMBER), _P("b", NUMBER)), NUMBER, np.minimum,
             "elementwise minimum of a and b (NaN propagates)"),
    Function("max", (_X,), NUMBER, _reduce(np.max, -np.inf),
             "largest element of x, a scalar (NaN if any is NaN; -inf if empty)"),
    Function("min", (_X,), NUMBER, _reduce(np.min, np.inf),
             "smallest element of x, a scalar (NaN if any is NaN; inf if empty)"),
    Function("sum", (_X,), NUMBER, _reduce(np.sum, 0.0), "sum of all elements of x, a scalar"),
    Function("mean", (_X,), NUMBER, _reduce(np.mean, np.nan),
             "mean of all elements of x, a scalar"),
    Function("rms", (_X,), NUMBER, _rms, "root mean square of all elements of x, a scalar"),
    Function("all", (_P("x", BOOL),), BOOL, _reduce(np.all, np.True_),
             "true if every element of x is true (true if empty)"),
    Function("any", (_P("x", BOOL),), BOOL, _reduce(np.any, np.False_),
             "true if some element of x is true"),
    Function("count", (_P("x", BOOL),), NUMBER,
             lambda x: np.float64(np.count_nonzero(x)), "number of true elements of x"),
    Function("where", (_P("c", BOOL), _P("a", "T"), _P("b", "T")), "T", np.where,
             "elementwise a where c is true, else b (a and b: both numbers or both booleans)"),
    Function("isnan", (_X,), BOOL, np.isnan, "x is NaN, elementwise"),
    Function("isinf", (_X,), BOOL, np.isinf, "x is +inf or -inf, elementwise"),
    Function("isfinite", (_X,), BOOL, np.isfinite, "x is neither NaN nor infinite, elementwise"),
    Function("isposinf", (_X,), BOOL, np.isposinf, "x is +inf, elementwise"),
    Function("isneginf", (_X,), BOOL, np.isneginf, "x is -inf, elementwise"),
    Function("same_bits", (_P("a", NUMBER), _P("b", NUMBER)), BOOL, same_bits,
             "bitwise equality in the original format: NaN matches NaN, +0 differs from -0"),
    Function("u", (_F,), NUMBER, lambda f: np.float64(f.u), "unit roundoff 2**-p of fmt"),
    Function("eps", (_F,), NUMBER, lambda f: np.float64(f.eps),
             "machine epsilon 2**(1-p) of fmt (the gap between 1 and the next number)"),
    Function("tiny", (_F,), NUMBER, lambda f: np.float64(f.tiny),
             "smallest positive normal number of fmt"),
    Function("fmax", (_F,), NUMBER, lambda f: np.float64(f.max), "largest finite number of fmt"),
    Function("subnormal_min", (_F,), NUMBER, lambda f: np.float64(f.smallest_subnormal),
             "smallest positive subnormal number of fmt"),
    Function("precision", (_F,), NUMBER, lambda f: np.float64(f.precision),
             "significand bits p of fmt, the implicit bit included"),
    Function("ulp", (_X, _P("fmt", FORMAT, ("name", "dtype"))), NUMBER,
             ulp,
             "unit in the last place of x in fmt (default: the kernel's dtype)"),
    Function("gamma", (_P("n", NUMBER), _P("u", NUMBER)), NUMBER,
             lambda n, uu: _formats.gamma(n, uu),
             "worst-case bound n u / (1 - n u) of an n-term sum (inf where n u >= 1)"),
    Function("pgamma", (_P("n", NUMBER), _P("u", NUMBER),
                        _P("p", NUMBER, ("value", DEFAULT_PGAMMA_P))), NUMBER, pgamma,
             "probabilistic bound exp(lambda sqrt(n) u + n u**2/(1-u)) - 1, holding with "
             "probability 1 - p (default p = 1e-9; Higham & Mary)"),
    Function("round", (_X, _F), NUMBER, lambda x, f: _formats.round_to(x, f),
             "x rounded to nearest-even into fmt (overflow: inf, or NaN without infinities)"),
    Function("convert", (_X, _F, _P("policy", STRING, choices=OVERFLOW_POLICIES)), NUMBER, convert,
             "x rounded into fmt, overflow by policy 'inf', 'nan' or 'saturate'"),
    Function("is_subnormal", (_X, _F), BOOL, lambda x, f: _formats.is_subnormal(x, f),
             "x is nonzero and below fmt's smallest normal in magnitude, elementwise"),
]}

#: name -> (type, value, doc).  A name a contract has in scope (see :func:`names_for`)
#: takes precedence: in contracts ``nan`` is the declared NaN policy (a string claim);
#: test for NaN values with ``isnan(x)``.
CONSTANTS: dict[str, tuple[str, Any, str]] = {
    "pi": (NUMBER, np.float64(math.pi), "3.14159..."),
    "inf": (NUMBER, np.float64(np.inf), "positive infinity"),
    "nan": (NUMBER, np.float64(np.nan), "not a number"),
    "true": (BOOL, np.True_, "boolean true"),
    "false": (BOOL, np.False_, "boolean false"),
}

#: the names every contract can use: name -> (type, doc)
CORE_NAMES: dict[str, tuple[str, str]] = {
    "out": (NUMBER, "the kernel's output, upcast to float64 (exactly)"),
    "ref": (NUMBER, "the oracle's output (float64)"),
    "dtype": (FORMAT, "the format the kernel is checked at"),
    "n": (INT, "the reduction length (product of the op's reduction symbols; 1 if none)"),
}


def claim_type(key: str) -> str:
    return {"format": FORMAT, "bool": BOOL}.get(CLAIMS[key].kind, STRING)


def _claim_types() -> dict[str, str]:
    return {k: claim_type(k) for k in CLAIMS}


def reserved_names() -> set[str]:
    """Names a tolerance entry may never take (formats, constants, functions, claims,
    core names)."""
    return set(FORMATS) | set(CONSTANTS) | set(FUNCTIONS) | set(CLAIMS) | set(CORE_NAMES)


def registered_protocols():
    """The registered measurement protocols (importing :mod:`kcontract.classes`, which
    registers them, where it exists)."""
    from . import registry
    try:
        return registry.protocols()
    except ModuleNotFoundError as exc:
        if exc.name != "kcontract.classes":
            raise
        return registry.PROTOCOLS


def registered_detectors():
    from . import registry
    try:
        return registry.detectors()
    except ModuleNotFoundError as exc:
        if exc.name != "kcontract.classes":
            raise
        return registry.DETECTORS


def names_for(op, protocol_kind: Optional[str] = None) -> dict[str, str]:
    """The names (and their types) the expressions of a contract on ``op`` measured
    by protocol ``protocol_kind`` may use.  ``op``: an op name or :class:`~kcontract.ops.Op`."""
    from ..ops import get_op
    from ..ops.base import GENERIC_QUANTITIES

    generic = op == "any"
    if isinstance(op, str) and not generic:
        op = get_op(op)
    names: dict[str, str] = {k: t for k, (t, _) in CORE_NAMES.items()}
    for k, t in _claim_types().items():
        names.setdefault(k, t)
    if not generic:
        for k in op.inputs:
            names.setdefault(k, NUMBER)
        for k in op.symbols:
            names.setdefault(k, INT)
        for k in op.quantity_names:
            names.setdefault(k, NUMBER)
    for k in GENERIC_QUANTITIES:
        names.setdefault(k, NUMBER)
    if protocol_kind is not None:
        specs = registered_protocols()
        if protocol_kind not in specs:
            raise UsageError(f"unknown protocol kind {protocol_kind!r}"
                             f"{did_you_mean(protocol_kind, specs)}")
        for k in specs[protocol_kind].provides:
            names.setdefault(k, NUMBER)
    for k in FORMATS:
        names.setdefault(k, FORMAT)
    return names


def name_docs(op, protocol_kind: Optional[str] = None) -> dict[str, tuple[str, str]]:
    """Like :func:`names_for`, with a one-line description of each name."""
    from ..ops import get_op

    generic = op == "any"
    if isinstance(op, str) and not generic:
        op = get_op(op)
    docs = {}
    for k, t in names_for(op, protocol_kind).items():
        if k in CORE_NAMES:
            d = CORE_NAMES[k][1]
        elif k in CLAIMS:
            d = f"declared claim: {CLAIMS[k].help}"
        elif not generic and k in op.inputs:
            d = f"input {k} of {op.name} (as the kernel received it), upcast to float64"
        elif not generic and k in op.symbols:
            d = f"shape symbol {k} of {op.name}"
        elif not generic and k in op.quantity_names:
            d = f"quantity {k} of {op.name}'s oracle"
        elif k == "mag":
            d = "the op's error scale (its magnitude quantity; |ref| unless the op says otherwise)"
        elif k == "cond":
            d = "the op's condition number (1 unless the op declares one)"
        elif k in FORMATS:
            d = f"the format {k}"
        else:
            d = f"provided by the protocol {protocol_kind}"
        docs[k] = (t, d)
    return docs
