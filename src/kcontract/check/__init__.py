"""The checker: protocol engine, isolated kernel worker, verdicts."""
from .verdict import Case, ContractResult, RunResult, Status, Violation
from .runner import check, select_contracts

__all__ = ["Case", "ContractResult", "RunResult", "Status", "Violation", "check", "select_contracts"]
