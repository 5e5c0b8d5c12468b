"""JSON Schema (draft 2020-12) of contract files, generated from the same tables the
loader validates against (classes, ops, dtypes, claims, protocols, families,
detectors, oracles), so the two never drift.

The schema checks structure; expressions are checked by the loader (it parses
and type-checks them), so in the schema an expression is just a scalar.
"""
from __future__ import annotations

from typing import Any

from .claims import CLAIMS
from ..formats import ALIASES, FORMATS, KERNEL_DTYPES
from . import vocabulary as V
from .loader import (CONTRACT_KEYS, FRAMEWORKS, ID_PATTERN, NAME_PATTERN, PROTOCOL_REQUIRED,
                     REQUIRED_KEYS, SCOPE_REQUIRED, SIGNATURE_REQUIRED)
from .registry import ORACLES

SCHEMA_ID = "kcontract-contract.schema.json"

_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean", list: "array",
               tuple: "array", dict: "object", type(None): "null"}
_TRUTHY = ["true", "false", "yes", "no", "on", "off", "1", "0", 0, 1]


def _enum_or_string(names) -> dict:
    names = list(names)
    return {"enum": names} if names else {"type": "string"}


def _claims_object(description: str) -> dict:
    props: dict[str, Any] = {}
    for key, spec in CLAIMS.items():
        if spec.kind == "format":
            props[key] = {"enum": list(FORMATS) + list(ALIASES), "description": spec.help}
        elif spec.kind == "bool":
            props[key] = {"anyOf": [{"type": "boolean"}, {"enum": _TRUTHY}],
                          "description": spec.help}
        else:
            props[key] = {"enum": list(spec.choices), "description": spec.help}
    return {"type": "object", "properties": props, "additionalProperties": False,
            "description": description}


def _param_schema(decl: tuple) -> dict:
    types, default = decl
    types = types if isinstance(types, tuple) else (types,)
    json_types = [_JSON_TYPES[t] for t in types if t in _JSON_TYPES]
    if float in types and "integer" not in json_types:
        json_types.append("integer")  # an int is accepted where a float is
    if default is None:
        json_types.append("null")
    return {"type": list(dict.fromkeys(json_types))} if json_types else {}


def _protocol_schema() -> dict:
    from ..ops import FAMILIES
    specs = V.registered_protocols()
    rules = []
    for name, spec in specs.items():
        rules.append({
            "if": {"properties": {"kind": {"const": name}}, "required": ["kind"]},
            "then": {"properties": {"params": {
                "type": "object",
                "properties": {p: _param_schema(d) for p, d in spec.params.items()},
                "additionalProperties": False}}},
        })
    return {
        "type": "object",
        "description": "the measurement protocol: how the kernel is exercised and measured",
        "properties": {
            "kind": _enum_or_string(specs),
            "seed": {"type": "integer", "minimum": 0},
            "trials": {"type": "integer", "minimum": 1},
            "families": {"type": "array", "minItems": 1, "items": {"enum": list(FAMILIES)}},
            "shapes": {"type": "array", "items": {
                "type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}},
            "params": {"type": "object"},
        },
        "required": list(PROTOCOL_REQUIRED),
        "additionalProperties": False,
        "allOf": rules,
    }


def _contract_properties() -> dict:
    from ..ops import OPS
    expression = {"$ref": "#/$defs/expression"}
    return {
        "id": {"type": "string", "pattern": ID_PATTERN},
        "class": {"enum": list(V.CLASS_IDS)},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "scope": {
            "type": "object",
            "properties": {
                "op": {"anyOf": [{"enum": list(OPS) + ["any"]},
                                 {"type": "string", "pattern": "^[^:]+:[A-Za-z_][A-Za-z0-9_]*$",
                                  "description": "a user-defined op: path/to/ops.py:NAME or "
                                                 "module:NAME"}]},
                "dtypes": {"type": "array", "minItems": 1, "items": {"enum": list(KERNEL_DTYPES)}},
                "frameworks": {"type": "array", "minItems": 1, "items": {"enum": list(FRAMEWORKS)}},
                "requires": _claims_object("claims that must hold for the contract to apply"),
            },
            "required": list(SCOPE_REQUIRED),
            "additionalProperties": False,
        },
        "claims": {"type": "array", "items": {"enum": list(CLAIMS)}},
        "precondition": expression,
        "tolerance": {"type": "object", "propertyNames": {"pattern": NAME_PATTERN},
                      "additionalProperties": expression},
        "postcondition": expression,
        "oracle": {"enum": list(ORACLES)},
        "protocol": _protocol_schema(),
        "signature": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "summary": {"type": "string"},
                           "detector": _enum_or_string(V.registered_detectors())},
            "required": list(SIGNATURE_REQUIRED),
            "additionalProperties": False,
        },
    }


def _op_rules() -> list:
    """Per op: shape symbols in ``protocol.shapes`` must be the op's."""
    from ..ops import OPS
    return [{
        "if": {"properties": {"scope": {"properties": {"op": {"const": name}},
                                        "required": ["op"]}},
               "required": ["scope"]},
        "then": {"properties": {"protocol": {"properties": {"shapes": {"items": {
            "propertyNames": {"enum": list(op.symbols)}}}}}}},
    } for name, op in OPS.items()]


def _run_properties() -> dict:
    return {
        "kernel": {"type": "string",
                   "description": "the kernel: 'path/to/file.py:function' or 'module:function'"},
        "dtype": {"enum": list(KERNEL_DTYPES)},
        "framework": {"enum": list(FRAMEWORKS)},
        "device": {"type": "string"},
        "declare": _claims_object("the kernel's declared claims"),
    }


def contract_schema() -> dict:
    """The JSON Schema of a contract file: one contract (optionally with run keys), or
    ``contracts:`` with a list of contracts (optionally with run keys)."""
    props = _contract_properties()
    assert tuple(props) == CONTRACT_KEYS
    rules = _op_rules()
    run = _run_properties()
    contract = {"type": "object", "properties": props, "required": list(REQUIRED_KEYS),
                "additionalProperties": False, "allOf": rules}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "kcontract contract file",
        "$defs": {
            "expression": {"type": ["string", "number", "boolean"],
                           "description": "an expression of the contract language"},
            "contract": contract,
        },
        "oneOf": [
            {"type": "object", "properties": {**props, **run}, "required": list(REQUIRED_KEYS),
             "additionalProperties": False, "allOf": rules},
            {"type": "object",
             "properties": {"contracts": {"type": "array", "minItems": 1,
                                          "items": {"$ref": "#/$defs/contract"}}, **run},
             "required": ["contracts"], "additionalProperties": False},
        ],
    }
