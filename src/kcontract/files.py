"""Reading and writing the files kcontract produces (runs, reports, certificates,
calibrations): folders are created as needed, ``-`` means standard output, and a file
that is missing or not JSON is a usage error, never a traceback."""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

from .errors import UsageError


def write_text(path: str, text: str) -> Optional[str]:
    """Write ``text`` to ``path`` (``-``: standard output); the path written, or None."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def write_json(path: str, data: Any) -> Optional[str]:
    return write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def load_json(path: str, what: str = "file") -> Any:
    """A JSON file's content; a missing file or invalid JSON is a UsageError naming
    ``what`` was expected (``certificate``, ``run``, ...)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise UsageError(f"no such {what}: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not a {what} (not JSON: {exc})") from None
