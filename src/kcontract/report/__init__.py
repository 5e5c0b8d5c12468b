"""Reports of a run: self-contained HTML, JUnit XML, Markdown.

Every renderer takes the run's JSON (``RunResult.to_json()``, schema
``kcontract.run/1``), so a run saved with ``--json`` renders later exactly as
it did live (``kcontract report RUN.json``).  Rendering never recomputes a
verdict.  matplotlib (for the HTML plots) is imported only when a plot is drawn.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from ..files import write_text
from .html import (render_arbitration_html, render_calibration_html, render_certificate_html,
                   render_html, render_index_html)
from .junit import render_junit
from .markdown import render_markdown


def write_reports(run: Mapping[str, Any], *, html: Optional[str] = None,
                  junit: Optional[str] = None, markdown: Optional[str] = None) -> list[str]:
    """Write the requested reports of ``run`` (``-``: standard output); returns the paths
    written."""
    written = [write_text(path, render(run)) for path, render in
               ((html, render_html), (junit, render_junit), (markdown, render_markdown)) if path]
    return [p for p in written if p]


__all__ = ["write_reports", "render_html", "render_junit", "render_markdown",
           "render_calibration_html", "render_certificate_html", "render_arbitration_html",
           "render_index_html"]
