"""The contract specification language: YAML contract files with a small, typed
expression sublanguage (see ``docs/language.md``)."""
from .contract import PARTS, CheckSpec, Contract, Expr, Protocol, Scope, Signature
from .expr import CompiledExpr, parse_expr
from .loader import load_check_file, load_check_text, load_contract_text, load_contracts
from .schema import contract_schema
from .vocabulary import CLASS_IDS, CONSTANTS, FUNCTIONS, names_for

__all__ = [
    "PARTS", "CheckSpec", "Contract", "Expr", "Protocol", "Scope", "Signature",
    "CompiledExpr", "parse_expr",
    "load_check_file", "load_check_text", "load_contract_text", "load_contracts",
    "contract_schema", "CLASS_IDS", "CONSTANTS", "FUNCTIONS", "names_for",
]
