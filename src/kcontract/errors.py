"""The three kinds of failure, three types.

* :class:`ContractError` -- a malformed contract (or contract file).  Raised when the
  contract is loaded, carries ``file:line:col`` and the offending text.
* A kernel that violates a contract is **not** an exception: it is a verdict
  (:mod:`kcontract.check.verdict`).
* :class:`CheckerError` -- a bug in kcontract itself.  It says so.

:class:`UsageError` covers bad command-line or API arguments (exit code 2).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable, Optional


class KContractError(Exception):
    """Base of kcontract's own exceptions."""


@dataclass
class SourceLocation:
    file: str
    line: int  # 1-based
    col: int  # 1-based
    text: str = ""  # the offending source line (optional)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class ContractError(KContractError):
    """A malformed contract: reported as ``file:line:col: message``."""

    def __init__(self, message: str, location: Optional[SourceLocation] = None,
                 snippet: str = ""):
        self.message = message
        self.location = location
        self.snippet = snippet
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.location}: {self.message}" if self.location else self.message
        if self.location and self.location.text:
            caret = " " * (max(self.location.col, 1) - 1) + "^"
            return f"{head}\n    {self.location.text}\n    {caret}"
        if self.snippet:
            return f"{head}\n    {self.snippet}"
        return head


class UsageError(KContractError):
    """Bad arguments to the CLI or the public API (exit code 2)."""


class CheckerError(KContractError):
    """An internal error of kcontract itself -- never the kernel's fault."""

    def __init__(self, message: str):
        super().__init__(
            f"internal kcontract error (a bug in the checker, not in your kernel): {message}")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean X?)"`` for the closest choice, or ``""``."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    if word.lower() in lowered:
        return f" (did you mean {lowered[word.lower()]}?)"
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""
