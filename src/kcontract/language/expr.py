"""The expression sublanguage: parse (lark, ``grammar.lark``), type-check, evaluate.

An expression is parsed once, when its contract is loaded, into a tree of small
evaluator nodes; type errors, unknown names and functions are reported then,
as :class:`~kcontract.errors.ContractError` pointing at the offending column of
the contract file.  Evaluation is vectorised numpy on float64 arrays with
broadcasting; shapes that do not broadcast are reported at the operator.
Nothing is ever passed to Python's ``eval``.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import lark
import numpy as np

from ..errors import ContractError, SourceLocation, UsageError, did_you_mean
from ..formats import ALIASES, FORMATS, Format, get_format
from . import vocabulary as V
from .vocabulary import BOOL, FORMAT, INT, NUMBER, STRING, describe_type

#: maps an offset into the expression's source to a location in its file
Locate = Callable[[int], SourceLocation]

_NUMERIC = (NUMBER, INT)
_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "**": np.power}
_ORDER = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
          "==": np.equal, "!=": np.not_equal}
_LOGIC = {"and": np.logical_and, "or": np.logical_or}

_TOKEN_TEXT = {"NUMBER": "a number", "STRING": "a string", "NAME": "a name", "LPAR": "'('",
               "RPAR": "')'", "COMMA": "','", "ADDOP": "'+' or '-'", "MULOP": "'*' or '/'",
               "POW": "'**'", "COMPARE": "a comparison", "NOT": "'not'", "AND": "'and'",
               "OR": "'or'", "$END": "the end of the expression"}
_CHAR_HINTS = {"&": " (write 'and')", "|": " (write 'or')", "!": " (write 'not')",
               "^": " (write '**' for powers)", "=": " (write '==' to compare)",
               "'": " (unterminated string)", '"': " (unterminated string)"}


@functools.lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    return lark.Lark(Path(__file__).with_name("grammar.lark").read_text(encoding="utf-8"),
                     parser="lalr", propagate_positions=True, maybe_placeholders=True)


def _is_numeric(t: str) -> bool:
    return t in _NUMERIC


def _shape(v) -> tuple:
    return np.shape(v)


def _check_broadcast(what: str, values, where: Callable[[], SourceLocation]) -> None:
    shapes = [_shape(v) for v in values]
    if sum(1 for s in shapes if s) < 2:
        return
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        listed = " and ".join(str(s).replace(", ", ",") for s in shapes)
        raise ContractError(f"{what} have shapes {listed} that do not broadcast",
                            where()) from None


def _as_format(v: Any, where: Callable[[], SourceLocation]) -> Format:
    try:
        return v if isinstance(v, Format) else get_format(v)
    except UsageError as exc:
        raise ContractError(f"not a floating-point format: {exc}", where()) from None


# -- evaluator nodes --------------------------------------------------------------

class _Ctx:
    __slots__ = ("env", "cache", "locate")

    def __init__(self, env: Mapping[str, Any], locate: Locate):
        self.env, self.cache, self.locate = env, {}, locate


class _Node:
    type: str
    start: int
    end: int

    def ev(self, ctx: _Ctx):  # pragma: no cover - abstract
        raise NotImplementedError


class _Lit(_Node):
    def __init__(self, value, type_, start, end):
        self.value, self.type, self.start, self.end = value, type_, start, end

    def ev(self, ctx):
        return self.value


class _Name(_Node):
    def __init__(self, name, type_, start, end):
        self.name, self.type, self.start, self.end = name, type_, start, end

    def ev(self, ctx):
        if self.name in ctx.cache:
            return ctx.cache[self.name]
        v = ctx.env.get(self.name)
        if v is None:
            raise ContractError(f"name '{self.name}' has no value where this expression is "
                                f"evaluated", ctx.locate(self.start))
        try:
            if self.type in _NUMERIC:
                v = np.asarray(v, dtype=np.float64)
            elif self.type == BOOL:
                v = np.asarray(v, dtype=bool)
            elif self.type == FORMAT:
                v = _as_format(v, lambda: ctx.locate(self.start))
            else:
                v = str(v)
        except (TypeError, ValueError) as exc:
            raise ContractError(f"the value of '{self.name}' is not {describe_type(self.type)}: "
                                f"{exc}", ctx.locate(self.start)) from None
        ctx.cache[self.name] = v
        return v


class _Unary(_Node):
    def __init__(self, op, operand, start, end):
        self.op, self.operand, self.start, self.end = op, operand, start, end
        self.type = BOOL if op == "not" else NUMBER

    def ev(self, ctx):
        v = self.operand.ev(ctx)
        if self.op == "not":
            return np.logical_not(v)
        return np.negative(v) if self.op == "-" else v


class _Binary(_Node):
    def __init__(self, op, left, right, op_pos, type_, fn, start, end):
        self.op, self.left, self.right, self.op_pos = op, left, right, op_pos
        self.type, self.fn, self.start, self.end = type_, fn, start, end

    def ev(self, ctx):
        a, b = self.left.ev(ctx), self.right.ev(ctx)
        if isinstance(a, (Format, str)):  # == / != of formats or strings
            eq = (a.name == b.name) if isinstance(a, Format) else (a == b)
            return np.bool_(eq if self.op == "==" else not eq)
        _check_broadcast(f"operands of '{self.op}'", (a, b), lambda: ctx.locate(self.op_pos))
        with np.errstate(all="ignore"):
            return self.fn(a, b)


class _Call(_Node):
    def __init__(self, fn: V.Function, args, type_, start, end):
        self.fn, self.args, self.type, self.start, self.end = fn, args, type_, start, end

    def ev(self, ctx):
        vals = []
        arrays = []
        for p, a in zip(self.fn.params, self.args):
            v = a.ev(ctx)
            if p.type == FORMAT:
                v = _as_format(v, lambda a=a: ctx.locate(a.start))
            elif p.type == STRING:
                if p.choices and v not in p.choices:
                    raise ContractError(
                        f"{p.name} of {self.fn.name} must be one of "
                        f"{', '.join(repr(c) for c in p.choices)}, got {v!r}", ctx.locate(a.start))
            else:
                arrays.append(v)
            vals.append(v)
        _check_broadcast(f"arguments of '{self.fn.name}'", arrays,
                         lambda: ctx.locate(self.start))
        try:
            with np.errstate(all="ignore"):
                return self.fn.impl(*vals)
        except (ValueError, TypeError) as exc:
            raise ContractError(f"{self.fn.name}(...) failed: {exc}",
                                ctx.locate(self.start)) from None


# -- the compiled expression ------------------------------------------------------

class CompiledExpr:
    """A parsed, type-checked expression (implements :class:`.contract.Expr`)."""

    def __init__(self, source: str, root: _Node, locate: Locate, names: frozenset):
        self.source = source
        self.type = root.type
        self._root = root
        self._locate = locate
        self._names = names
        self.location: Optional[SourceLocation] = locate(_first_char(source))

    @property
    def names(self) -> frozenset:
        """The names the expression reads from its environment."""
        return self._names

    def locate(self, offset: int) -> SourceLocation:
        return self._locate(offset)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        v = self._root.ev(_Ctx(env, self._locate))
        if isinstance(v, np.ndarray) and v.ndim == 0:
            return v[()]
        return v

    def __repr__(self) -> str:
        return f"CompiledExpr({self.source.strip()!r}: {self.type})"


def _first_char(source: str) -> int:
    return len(source) - len(source.lstrip())


def default_locator(source: str, location: Optional[SourceLocation] = None) -> Locate:
    """Offsets into ``source`` as locations: relative to ``location`` (the position of
    the source's first character) on its line, or within ``source`` itself."""
    def locate(offset: int) -> SourceLocation:
        offset = max(0, min(offset, len(source)))
        before = source[:offset]
        nl = before.count("\n")
        line_start = before.rfind("\n") + 1
        col = offset - line_start + 1
        if location is None:
            line_text = source[line_start:].split("\n", 1)[0]
            return SourceLocation("<expression>", nl + 1, col, line_text)
        if nl == 0:
            return SourceLocation(location.file, location.line, location.col + offset,
                                  location.text)
        line_text = source[line_start:].split("\n", 1)[0]
        return SourceLocation(location.file, location.line + nl, col, line_text)
    return locate


def parse_expr(source: str, *, location: Optional[SourceLocation] = None,
               kind: Optional[str] = None, names: Optional[Mapping[str, str]] = None,
               what: str = "expression", locate: Optional[Locate] = None,
               pending: Optional[Mapping[str, str]] = None) -> CompiledExpr:
    """Parse and type-check ``source``.

    ``names`` maps each name the expression may read to its type (see
    :func:`.vocabulary.names_for`); format names and constants are always known.
    ``kind`` (``"number"`` or ``"bool"``) is the type the whole expression must
    have; ``what`` names it in messages ("postcondition", "tolerance 'atol'").
    ``location`` is where the source's first character is in its file, or
    ``locate`` maps any offset of the source to its location.  ``pending`` maps names
    that exist but may not be used here to the reason (said when they are used).
    """
    source = str(source)
    loc = locate or default_locator(source, location)
    if not source.strip():
        raise ContractError(f"{what} is empty", loc(0))
    try:
        tree = _parser().parse(source)
    except lark.exceptions.UnexpectedInput as exc:
        raise _syntax_error(source, exc, loc) from None
    checker = _Checker(source, dict(names or {}), loc, dict(pending or {}))
    root = checker.compile(tree)
    if kind == BOOL and root.type != BOOL:
        raise ContractError(f"{what} must be boolean (a comparison such as "
                            f"'abs(out - ref) <= tol'), but this is {describe_type(root.type)}",
                            loc(root.start))
    if kind == NUMBER and not _is_numeric(root.type):
        raise ContractError(f"{what} must be a number, but this is {describe_type(root.type)}",
                            loc(root.start))
    return CompiledExpr(source, root, loc, frozenset(checker.used))


def _syntax_error(source: str, exc: lark.exceptions.UnexpectedInput, loc: Locate) -> ContractError:
    if isinstance(exc, lark.exceptions.UnexpectedCharacters):
        ch = source[exc.pos_in_stream]
        hint = _CHAR_HINTS.get(ch, "")
        if ch == "!" and source[exc.pos_in_stream:exc.pos_in_stream + 2] == "!=":
            hint = ""
        return ContractError(f"unexpected character {ch!r}{hint}", loc(exc.pos_in_stream))
    tok = getattr(exc, "token", None)
    expected = sorted(getattr(exc, "expected", ()) or (),
                      key=lambda t: list(_TOKEN_TEXT).index(t) if t in _TOKEN_TEXT else 99)
    wanted = ", ".join(_TOKEN_TEXT.get(t, t) for t in expected)
    wanted = f"expected one of: {wanted}" if len(expected) > 1 else f"expected {wanted}"
    if tok is None or tok.type == "$END":
        pos = len(source.rstrip())
        found = "unexpected end of expression"
    else:
        pos = tok.start_pos
        if tok.type == "COMPARE" and "COMPARE" not in expected:
            return ContractError("comparisons do not chain: write 'a < b and b < c'", loc(pos))
        found = f"unexpected {tok.value!r}"
        if tok.type == "RPAR" and "RPAR" not in expected:
            found += " (no matching '(')"
    return ContractError(f"{found}; {wanted}", loc(pos))


class _Checker:
    """Compiles a lark tree into evaluator nodes, checking types on the way."""

    def __init__(self, source: str, names: dict[str, str], locate: Locate,
                 pending: Mapping[str, str]):
        self.source, self.names, self.locate = source, names, locate
        self.pending = pending
        self.used: set[str] = set()

    def error(self, message: str, offset: int) -> ContractError:
        return ContractError(message, self.locate(offset))

    def text(self, node: _Node) -> str:
        s = " ".join(self.source[node.start:node.end].split())
        return s if len(s) <= 40 else s[:37] + "..."

    def compile(self, t) -> _Node:
        if isinstance(t, lark.Token):  # pragma: no cover - rules wrap every token
            raise AssertionError(t)
        return getattr(self, "_" + t.data)(t, t.meta.start_pos, t.meta.end_pos)

    # atoms
    def _number(self, t, start, end):
        return _Lit(np.float64(float(t.children[0])), NUMBER, start, end)

    def _string(self, t, start, end):
        return _Lit(str(t.children[0])[1:-1], STRING, start, end)

    def _group(self, t, start, end):
        inner = self.compile(t.children[1])
        inner.start, inner.end = start, end
        return inner

    def _name(self, t, start, end):
        name = str(t.children[0])
        if name in FORMATS:
            return _Lit(FORMATS[name], FORMAT, start, end)
        if name in self.names:
            self.used.add(name)
            return _Name(name, self.names[name], start, end)
        if name in V.CONSTANTS:
            typ, value, _ = V.CONSTANTS[name]
            return _Lit(value, typ, start, end)
        if name in self.pending:
            raise self.error(f"'{name}' {self.pending[name]}", start)
        if name in V.FUNCTIONS:
            raise self.error(f"'{name}' is a function: call it as {V.FUNCTIONS[name].signature}",
                             start)
        if name.lower() in ALIASES:
            hint = f" (did you mean {ALIASES[name.lower()]}?)"
        else:
            hint = did_you_mean(name, list(self.names) + list(V.CONSTANTS) + list(FORMATS))
        raise self.error(f"unknown name '{name}'{hint}", start)

    # operators
    def _unop(self, t, start, end):
        op_tok, operand_t = t.children
        op = str(op_tok)
        operand = self.compile(operand_t)
        if op == "not":
            self._want(operand, BOOL, "operand of 'not'")
        else:
            self._want(operand, NUMBER, f"operand of unary '{op}'")
        return _Unary(op, operand, start, end)

    def _binop(self, t, start, end):
        lt, op_tok, rt = t.children
        op = str(op_tok)
        left, right = self.compile(lt), self.compile(rt)
        if op in _LOGIC:
            self._want(left, BOOL, f"operand of '{op}'")
            self._want(right, BOOL, f"operand of '{op}'")
            return _Binary(op, left, right, op_tok.start_pos, BOOL, _LOGIC[op], start, end)
        if op in _ARITH:
            self._want(left, NUMBER, f"operand of '{op}'")
            self._want(right, NUMBER, f"operand of '{op}'")
            return _Binary(op, left, right, op_tok.start_pos, NUMBER, _ARITH[op], start, end)
        lt_, rt_ = left.type, right.type
        same = (_is_numeric(lt_) and _is_numeric(rt_)) or lt_ == rt_
        if not same:
            raise self.error(f"cannot compare {describe_type(lt_)} with {describe_type(rt_)} "
                             f"('{self.text(left)}' {op} '{self.text(right)}')", op_tok.start_pos)
        if op not in ("==", "!=") and not _is_numeric(lt_):
            raise self.error(f"'{op}' orders numbers, but both sides are "
                             f"{describe_type(lt_)[2:]}s (use == or !=)", op_tok.start_pos)
        if lt_ == STRING:
            self._check_string_literal(left, right)
        return _Binary(op, left, right, op_tok.start_pos, BOOL, _ORDER[op], start, end)

    def _check_string_literal(self, left: _Node, right: _Node) -> None:
        """``nan == 'propogate'``: a claim compared with a value it can never take."""
        from .claims import CLAIMS
        for a, b in ((left, right), (right, left)):
            if isinstance(a, _Name) and a.name in CLAIMS and isinstance(b, _Lit):
                choices = CLAIMS[a.name].choices
                if choices and b.value not in choices:
                    raise self.error(f"claim {a.name} is never {b.value!r}: it is one of "
                                     f"{', '.join(choices)}{did_you_mean(b.value, choices)}",
                                     b.start)

    def _want(self, node: _Node, typ: str, what: str) -> None:
        ok = _is_numeric(node.type) if typ == NUMBER else node.type == typ
        if not ok:
            raise self.error(f"{what} must be {describe_type(typ)}, but '{self.text(node)}' is "
                             f"{describe_type(node.type)}", node.start)

    # calls
    def _call(self, t, start, end):
        name_tok = t.children[0]
        name = str(name_tok)
        args_t = t.children[2]
        arg_trees = [c for c in args_t.children if isinstance(c, lark.Tree)] if args_t else []
        if name not in V.FUNCTIONS:
            if name in self.names or name in V.CONSTANTS or name in FORMATS:
                raise self.error(f"'{name}' is not a function{did_you_mean(name, V.FUNCTIONS)}",
                                 start)
            hint = did_you_mean(name, V.FUNCTIONS) or f"; functions: {', '.join(V.FUNCTIONS)}"
            raise self.error(f"unknown function '{name}'{hint}", start)
        fn = V.FUNCTIONS[name]
        n_max, n_min = len(fn.params), fn.min_args
        if not n_min <= len(arg_trees) <= n_max:
            want = str(n_max) if n_min == n_max else f"{n_min} or {n_max}"
            plural = "" if want == "1" else "s"
            raise self.error(f"{fn.signature} takes {want} argument{plural}, got "
                             f"{len(arg_trees)}", start)
        args = [self.compile(a) for a in arg_trees]
        tvar = None
        for i, p in enumerate(fn.params):
            if i >= len(args):
                args.append(self._default(fn, p, start, end))
                continue
            a = args[i]
            what = f"argument {i + 1} ({p.name}) of {fn.signature}"
            if p.type == "T":
                cat = NUMBER if _is_numeric(a.type) else a.type
                if cat not in (NUMBER, BOOL):
                    raise self.error(f"{what} must be a number or a boolean, but "
                                     f"'{self.text(a)}' is {describe_type(a.type)}", a.start)
                if tvar is not None and cat != tvar:
                    raise self.error(f"{what} must be {describe_type(tvar)} like the other "
                                     f"branch, but '{self.text(a)}' is {describe_type(a.type)}",
                                     a.start)
                tvar = cat
                continue
            self._want(a, p.type, what)
            if p.choices and isinstance(a, _Lit) and a.value not in p.choices:
                raise self.error(f"{what} must be one of "
                                 f"{', '.join(repr(c) for c in p.choices)}, got {a.value!r}"
                                 f"{did_you_mean(a.value, p.choices)}", a.start)
        typ = tvar if fn.returns == "T" else fn.returns
        return _Call(fn, args, typ, start, end)

    def _default(self, fn: V.Function, p: V.Param, start: int, end: int) -> _Node:
        kind, value = p.default
        if kind == "value":
            return _Lit(np.float64(value), NUMBER, start, end)
        if value not in self.names:
            raise self.error(f"{fn.name}(...) without {p.name} uses '{value}', which is not "
                             f"defined here: pass {p.name} explicitly", start)
        self.used.add(value)
        return _Name(value, self.names[value], start, end)
