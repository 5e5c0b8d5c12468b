"""Load contract files (YAML) into :class:`~.contract.Contract` objects.

The file is composed with PyYAML (``yaml.compose``) so every key and value keeps
its position; every problem is a :class:`~kcontract.errors.ContractError` at
``file:line:col`` (1-based) with the offending line.  Expressions are parsed by
:mod:`.expr` with a locator that maps each character of the (unquoted, unfolded)
YAML scalar back to its column in the file.
"""
from __future__ import annotations

import bisect
import copy
import re
from pathlib import Path
from typing import Any, Optional

import yaml

from . import claims as _claims
from ..errors import ContractError, SourceLocation, UsageError, did_you_mean
from ..frameworks import FRAMEWORKS
from ..formats import ALIASES, KERNEL_DTYPES
from . import vocabulary as V
from .contract import ANY_OP, CheckSpec, Contract, Protocol, Scope, Signature
from .expr import CompiledExpr, parse_expr
from .registry import ORACLES

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$"
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"

CONTRACT_KEYS = ("id", "class", "title", "description", "scope", "claims", "precondition",
                 "tolerance", "postcondition", "oracle", "protocol", "signature")
REQUIRED_KEYS = ("id", "class", "scope", "postcondition", "tolerance", "oracle", "protocol",
                 "signature")
RUN_KEYS = ("kernel", "dtype", "framework", "device", "declare")
SCOPE_KEYS, SCOPE_REQUIRED = ("op", "dtypes", "frameworks", "requires"), ("op", "dtypes")
PROTOCOL_KEYS, PROTOCOL_REQUIRED = ("kind", "seed", "trials", "families", "shapes", "params"), ("kind",)
SIGNATURE_KEYS, SIGNATURE_REQUIRED = ("code", "summary", "detector"), ("code", "summary")

#: keys of the nested sections, for "belongs under" hints
_NESTED = {**{k: "scope" for k in SCOPE_KEYS}, **{k: "protocol" for k in PROTOCOL_KEYS},
           **{k: "signature" for k in SIGNATURE_KEYS}}

_STR, _INT, _FLOAT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in
                                    ("str", "int", "float", "bool", "null"))


# -- public API -------------------------------------------------------------------

def load_contracts(path) -> list[Contract]:
    """The contracts of one file (a single contract mapping or ``contracts:`` list)."""
    return list(load_check_file(path).contracts)


def load_contract_text(text: str, filename: str = "<string>") -> list[Contract]:
    return list(_Document(text, filename).load().contracts)


def load_check_file(path) -> CheckSpec:
    """A contract file with its optional run keys (``kernel``, ``dtype``, ...)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"no such contract file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read contract file {path}: {exc}") from None
    return _Document(text, str(path)).load()


def load_check_text(text: str, filename: str = "<string>") -> CheckSpec:
    return _Document(text, filename).load()


# -- positions --------------------------------------------------------------------

def _align(raw: str, value: str, style: Optional[str]) -> list[int]:
    """For each character of a scalar's value, its index in the scalar's raw source
    (plus one entry for the end).  The value is the raw text with quotes, escapes,
    indentation and line folding removed, so a greedy forward match recovers it."""
    if style in ("|", ">"):
        j = raw.index("\n") + 1 if "\n" in raw else len(raw)
    elif style in ("'", '"'):
        j = 1
    else:
        j = 0
    out = []
    for ch in value:
        k = raw.find(ch, j)
        if k < 0:  # an escape we cannot follow: stay put
            out.append(min(j, len(raw)))
            continue
        out.append(k)
        j = k + 1
    out.append(min(j, len(raw)))
    return out


def _kind(node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return {_STR: "a string", _INT: "an integer", _FLOAT: "a number", _BOOL: "a boolean",
            _NULL: "nothing (null)"}.get(node.tag, "a scalar")


def _py_type_words(types) -> str:
    words = {int: "an integer", float: "a number", str: "a string", bool: "a boolean",
             list: "a list", tuple: "a list", dict: "a mapping", type(None): "null"}
    return " or ".join(dict.fromkeys(words.get(t, t.__name__) for t in types))


class _Document:
    def __init__(self, text: str, filename: str):
        self.text, self.file = text, filename
        self.lines = text.split("\n")
        self.starts = [0]
        for line in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)
        self._construct = yaml.constructor.SafeConstructor()

    # locations
    def at_index(self, index: int) -> SourceLocation:
        line = max(bisect.bisect_right(self.starts, index) - 1, 0)
        text = self.lines[line].rstrip("\r") if line < len(self.lines) else ""
        return SourceLocation(self.file, line + 1, index - self.starts[line] + 1, text)

    def at(self, node_or_mark) -> SourceLocation:
        mark = getattr(node_or_mark, "start_mark", node_or_mark)
        line = mark.line
        text = self.lines[line].rstrip("\r") if line < len(self.lines) else ""
        return SourceLocation(self.file, line + 1, mark.column + 1, text)

    def error(self, message: str, node_or_mark) -> ContractError:
        return ContractError(message, self.at(node_or_mark))

    def locator(self, node):
        base = node.start_mark.index
        raw = self.text[base:node.end_mark.index]
        idx = _align(raw, node.value, node.style)
        return lambda offset: self.at_index(base + idx[max(0, min(offset, len(idx) - 1))])

    # generic values
    def value(self, node) -> Any:
        return self._construct.construct_object(node, deep=True)

    def mapping(self, node, what: str, allowed, required=(), hint="") -> dict:
        if not isinstance(node, yaml.MappingNode):
            raise self.error(f"{what} must be a mapping{hint}, got {_kind(node)}", node)
        out: dict[str, tuple] = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                raise self.error(f"keys of {what} must be names, got {_kind(k)}", k)
            key = k.value
            if key in out:
                raise self.error(f"duplicate key '{key}' in {what} (first given at line "
                                 f"{out[key][0].start_mark.line + 1})", k)
            if allowed is not None and key not in allowed:
                hint_ = did_you_mean(key, allowed)
                section = _NESTED.get(key)
                if not hint_ and section and section in allowed:
                    hint_ = f" ('{key}' belongs under '{section}')"
                known = "" if hint_ else f"; known keys: {', '.join(allowed)}"
                raise self.error(f"unknown key '{key}' in {what}{hint_}{known}", k)
            out[key] = (k, v)
        for key in required:
            if key not in out:
                raise self.error(f"{what} is missing the required key '{key}'", node)
        return out

    def string(self, node, what: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.tag != _STR:
            raise self.error(f"{what} must be a string, got {_kind(node)}", node)
        return node.value

    def integer(self, node, what: str, minimum: int) -> int:
        if not isinstance(node, yaml.ScalarNode) or node.tag != _INT:
            raise self.error(f"{what} must be an integer >= {minimum}, got {_kind(node)}", node)
        v = self.value(node)
        if v < minimum:
            raise self.error(f"{what} must be an integer >= {minimum}, got {v}", node)
        return v

    def name_list(self, node, what: str, choices, noun: str) -> tuple[str, ...]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(f"{what}: expected a list of {noun} names, got {_kind(node)}", node)
        out = []
        for item in node.value:
            name = self.string(item, f"each entry of {what}")
            if name not in choices:
                raise self.error(f"unknown {noun} '{name}'{did_you_mean(name, choices)}; "
                                 f"known: {', '.join(choices)}", item)
            if name not in out:
                out.append(name)
        if not out:
            raise self.error(f"{what} must name at least one {noun}", node)
        return tuple(out)

    def choice(self, node, what: str, choices, noun: str) -> str:
        name = self.string(node, what)
        if name not in choices:
            raise self.error(f"unknown {noun} '{name}'{did_you_mean(name, choices)}; known: "
                             f"{', '.join(choices)}", node)
        return name

    def dtype(self, node, what: str) -> str:
        name = self.string(node, what)
        if name in KERNEL_DTYPES:
            return name
        if name.lower() in ALIASES and ALIASES[name.lower()] in KERNEL_DTYPES:
            hint = f" (did you mean {ALIASES[name.lower()]}?)"
        else:
            hint = did_you_mean(name, KERNEL_DTYPES)
        raise self.error(f"unknown dtype '{name}'{hint}; kernel dtypes: "
                         f"{', '.join(KERNEL_DTYPES)}", node)

    def claim_values(self, node, what: str) -> dict:
        out = {}
        for key, (k, v) in self.mapping(node, what, None).items():
            if key not in _claims.CLAIMS:
                raise self.error(f"unknown claim '{key}'{did_you_mean(key, _claims.CLAIMS)}; "
                                 f"known: {', '.join(_claims.CLAIMS)}", k)
            if not isinstance(v, yaml.ScalarNode) or v.tag == _NULL:
                raise self.error(f"the value of claim '{key}' must be a scalar, got {_kind(v)}", v)
            raw = self.value(v)
            try:
                _claims.parse_value(key, raw)
            except UsageError as exc:
                raise self.error(f"{what}: {exc}", v) from None
            out[key] = raw
        return out

    def expression(self, node, what: str, kind: str, names, pending=None) -> CompiledExpr:
        if not isinstance(node, yaml.ScalarNode) or node.tag == _NULL:
            raise self.error(f"{what} must be an expression (a string), got {_kind(node)}", node)
        return parse_expr(node.value, kind=kind, names=names, what=what,
                          locate=self.locator(node), pending=pending)

    # the document
    def load(self) -> CheckSpec:
        try:
            root = yaml.compose(self.text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            problem = exc.problem or exc.context or "invalid YAML"
            raise ContractError(f"YAML syntax error: {problem}",
                                self.at(mark) if mark else None) from None
        except yaml.YAMLError as exc:
            raise ContractError(f"YAML error: {exc}", SourceLocation(self.file, 1, 1)) from None
        if root is None:
            raise ContractError("empty contract file: expected a contract mapping or "
                                "'contracts:' with a list", SourceLocation(self.file, 1, 1, ""))
        hint = " (one contract, or 'contracts:' with a list of them)"
        if isinstance(root, yaml.MappingNode) and any(k.value == "contracts" for k, _ in root.value
                                                      if isinstance(k, yaml.ScalarNode)):
            top = self.mapping(root, "the contract file", ("contracts",) + RUN_KEYS, ("contracts",))
            knode = top["contracts"][1]
            if not isinstance(knode, yaml.SequenceNode):
                raise self.error(f"contracts: expected a list of contracts, got {_kind(knode)}",
                                 knode)
            if not knode.value:
                raise self.error("contracts: the list is empty", knode)
            loaded = [self.contract(c, CONTRACT_KEYS) for c in knode.value]
        else:
            top = self.mapping(root, "the contract file", CONTRACT_KEYS + RUN_KEYS, (), hint)
            loaded = [self.contract(root, CONTRACT_KEYS + RUN_KEYS)]
        seen: dict[str, Any] = {}
        for c, id_node in loaded:
            if c.id in seen:
                raise self.error(f"duplicate contract id '{c.id}' (first defined at line "
                                 f"{seen[c.id].start_mark.line + 1})", id_node)
            seen[c.id] = id_node
        contracts = [c for c, _ in loaded]
        return self.run_keys(top, tuple(contracts))

    def run_keys(self, top: dict, contracts) -> CheckSpec:
        kw: dict[str, Any] = {}
        if "kernel" in top:
            kw["kernel"] = self.string(top["kernel"][1], "kernel")
        if "dtype" in top:
            kw["dtype"] = self.dtype(top["dtype"][1], "dtype")
        if "framework" in top:
            kw["framework"] = self.choice(top["framework"][1], "framework", FRAMEWORKS,
                                          "framework")
        if "device" in top:
            kw["device"] = self.string(top["device"][1], "device")
        if "declare" in top:
            kw["declare"] = self.claim_values(top["declare"][1], "declare")
        return CheckSpec(contracts=contracts, source=self.file, **kw)

    def contract(self, node, allowed) -> tuple[Contract, Any]:
        m = self.mapping(node, "the contract", allowed, REQUIRED_KEYS)
        id_node = m["id"][1]
        cid = self.string(id_node, "id")
        if not re.match(ID_PATTERN, cid):
            raise self.error(f"id '{cid}' must start with a letter or digit and contain only "
                             f"letters, digits and _ . : / -", id_node)
        cls = self.choice(m["class"][1], "class", V.CLASS_IDS, "class")
        title = self.string(m["title"][1], "title") if "title" in m else ""
        description = self.string(m["description"][1], "description") if "description" in m else ""
        scope = self.scope(m["scope"][1])
        from ..ops import get_op
        op = scope.op if scope.op == ANY_OP else get_op(scope.op)
        protocol = self.protocol(m["protocol"][1], op)
        oracle = self.choice(m["oracle"][1], "oracle", tuple(ORACLES), "oracle")
        accepted = V.registered_protocols()[protocol.kind].oracles
        if accepted and oracle not in accepted:
            raise self.error(f"protocol {protocol.kind} measures against the oracle "
                             f"{' or '.join(accepted)}, not '{oracle}'", m["oracle"][1])
        signature = self.signature(m["signature"][1])
        declared = ()
        if "claims" in m:
            declared = self.name_list(m["claims"][1], "claims", tuple(_claims.CLAIMS), "claim")

        names = V.names_for(op, protocol.kind)
        pre = None
        if "precondition" in m:
            tnode = m["tolerance"][1]
            tnames = [k.value for k, _ in tnode.value] if isinstance(tnode, yaml.MappingNode) else []
            pending = {t: "is a tolerance: the precondition cannot use tolerances"
                       for t in tnames}
            pending["out"] = ("is the kernel's output: the precondition selects inputs before "
                              "the kernel runs")
            pre = self.expression(m["precondition"][1], "precondition", V.BOOL,
                                  {k: t for k, t in names.items() if k != "out"}, pending)
        tolerance = self.tolerance(m["tolerance"][1], names, op, protocol.kind)
        post = self.expression(m["postcondition"][1], "postcondition", V.BOOL, names)

        read = list(declared)
        for e in ([pre] if pre else []) + list(tolerance.values()) + [post]:
            read += sorted(n for n in e.names if n in _claims.CLAIMS)
        read += list(scope.requires)
        contract = Contract(id=cid, cls=cls, title=title, scope=scope, postcondition=post,
                            tolerance=tolerance, oracle=oracle, protocol=protocol,
                            signature=signature, precondition=pre,
                            claims=tuple(dict.fromkeys(read)), description=description,
                            source=self.file, location=self.at(node))
        return contract, id_node

    def scope(self, node) -> Scope:
        m = self.mapping(node, "scope", SCOPE_KEYS, SCOPE_REQUIRED)
        op, op_spec = self.op(m["op"][1])
        dnode = m["dtypes"][1]
        if not isinstance(dnode, yaml.SequenceNode):
            raise self.error(f"scope.dtypes: expected a list of dtype names, got {_kind(dnode)}",
                             dnode)
        dtypes = tuple(dict.fromkeys(self.dtype(d, "each entry of scope.dtypes")
                                     for d in dnode.value))
        if not dtypes:
            raise self.error("scope.dtypes must name at least one dtype", dnode)
        frameworks = FRAMEWORKS
        if "frameworks" in m:
            frameworks = self.name_list(m["frameworks"][1], "scope.frameworks", FRAMEWORKS,
                                        "framework")
        requires = {}
        if "requires" in m:
            requires = {k: _claims.parse_value(k, v) for k, v in
                        self.claim_values(m["requires"][1], "scope.requires").items()}
        return Scope(op=op, dtypes=dtypes, frameworks=frameworks, requires=requires,
                     op_spec=op_spec)

    def op(self, node) -> tuple[str, Optional[str]]:
        """``scope.op``: a known op's name, ``any`` (a generic contract), or a user-defined
        op's spec ``ops.py:NAME`` (relative to this file) / ``module:NAME``."""
        from ..ops import get_op, known_names
        from ..ops.registry import BUILTIN, is_spec
        text = self.string(node, "scope.op")
        if text == ANY_OP:
            return ANY_OP, None
        if text in BUILTIN:  # the suite's own: no need to look through the entry points
            return text, None
        if is_spec(text):
            import os
            base = os.path.dirname(os.path.abspath(self.file)) if self.file else None
            try:
                op = get_op(text, base=base)
            except UsageError as exc:
                raise self.error(f"scope.op: {exc}", node) from None
            return op.name, op.origin or text
        return self.choice(node, "scope.op", tuple(known_names()) + (ANY_OP,), "op"), None

    def protocol(self, node, op) -> Protocol:
        from ..ops import FAMILIES
        m = self.mapping(node, "protocol", PROTOCOL_KEYS, PROTOCOL_REQUIRED)
        specs = V.registered_protocols()
        kind = self.choice(m["kind"][1], "protocol.kind", tuple(specs), "protocol kind")
        kw: dict[str, Any] = {"kind": kind}
        if "seed" in m:
            kw["seed"] = self.integer(m["seed"][1], "protocol.seed", 0)
        if "trials" in m:
            kw["trials"] = self.integer(m["trials"][1], "protocol.trials", 1)
        if "families" in m:
            kw["families"] = self.name_list(m["families"][1], "protocol.families",
                                            tuple(FAMILIES), "input family")
        if "shapes" in m:
            if op == ANY_OP:
                raise self.error("protocol.shapes: a generic contract (scope.op: any) names no "
                                 "shapes; it runs at each op's benchmarked shape",
                                 m["shapes"][1])
            kw["shapes"] = self.shapes(m["shapes"][1], op)
        spec = specs[kind]
        params = {name: copy.deepcopy(default) for name, (_, default) in spec.params.items()}
        if "params" in m:
            for name, (k, v) in self.mapping(m["params"][1], "protocol.params", None).items():
                if name not in spec.params:
                    known = (f"; its parameters: {', '.join(spec.params)}" if spec.params
                             else "; it takes no parameters")
                    raise self.error(f"unknown parameter '{name}' of protocol {kind}"
                                     f"{did_you_mean(name, spec.params)}{known}", k)
                params[name] = self.param(v, name, kind, spec.params[name])
        kw["params"] = params
        return Protocol(**kw)

    def param(self, node, name: str, kind: str, decl: tuple) -> Any:
        types, default = decl
        types = types if isinstance(types, tuple) else (types,)
        value = self.value(node)
        if value is None and default is None:
            return None
        if isinstance(value, bool):
            ok = bool in types
        elif isinstance(value, int) and float in types and int not in types:
            value, ok = float(value), True
        elif isinstance(value, list) and tuple in types and list not in types:
            value, ok = tuple(value), True
        else:
            ok = isinstance(value, types)
        if not ok:
            shown = f" ({node.value!r})" if isinstance(node, yaml.ScalarNode) else ""
            raise self.error(f"parameter '{name}' of protocol {kind} must be "
                             f"{_py_type_words(types)}, got {_kind(node)}{shown}", node)
        return value

    def shapes(self, node, op) -> tuple:
        if not isinstance(node, yaml.SequenceNode):
            raise self.error(f"protocol.shapes: expected a list of mappings symbol: size, got "
                             f"{_kind(node)}", node)
        out = []
        for item in node.value:
            shape = {}
            for sym, (k, v) in self.mapping(item, "each entry of protocol.shapes", None).items():
                if sym not in op.symbols:
                    raise self.error(f"unknown shape symbol '{sym}' for {op.name}"
                                     f"{did_you_mean(sym, op.symbols)}; its symbols: "
                                     f"{', '.join(op.symbols)}", k)
                shape[sym] = self.integer(v, f"shape symbol {sym}", 0)
            out.append(shape)
        return tuple(out)

    def signature(self, node) -> Signature:
        m = self.mapping(node, "signature", SIGNATURE_KEYS, SIGNATURE_REQUIRED)
        detector = None
        if "detector" in m:
            detector = self.choice(m["detector"][1], "signature.detector",
                                   tuple(V.registered_detectors()), "detector")
        return Signature(code=self.string(m["code"][1], "signature.code"),
                         summary=self.string(m["summary"][1], "signature.summary"),
                         detector=detector)

    def tolerance(self, node, names: dict, op, kind) -> dict:
        out: dict[str, CompiledExpr] = {}
        reserved = V.reserved_names()
        entries = self.mapping(node, "tolerance", None)
        later = {t: "is defined later in tolerance: an entry may use only the entries above it"
                 for t in entries}
        for name, (k, v) in entries.items():
            later.pop(name)
            if not re.match(NAME_PATTERN, name):
                raise self.error(f"tolerance name '{name}' is not a name (letters, digits, _)", k)
            if name in names or name in reserved:
                raise self.error(f"tolerance name '{name}' shadows {self.what_is(name, op, kind)};"
                                 f" choose another name", k)
            out[name] = self.expression(v, f"tolerance '{name}'", V.NUMBER, names, later)
            names[name] = V.NUMBER
        return out

    @staticmethod
    def what_is(name: str, op, kind) -> str:
        if name in V.FUNCTIONS:
            return f"the function {V.FUNCTIONS[name].signature}"
        if name in V.CONSTANTS and name not in _claims.CLAIMS:
            return f"the constant {name}"
        docs = V.name_docs(op, kind)
        return f"'{name}' ({docs[name][1]})" if name in docs else f"'{name}'"
