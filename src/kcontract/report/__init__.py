"""Reports of a run: self-contained HTML, JUnit XML, Markdown.

Every renderer takes the run's JSON (``RunResult.to_json()``, schema
``kcontract.run/1``), so a run saved with ``--json`` renders later exactly as
it did live (``kcontract report RUN.json``).  Rendering never recomputes a
verdict.  matplotlib (for the HTML plots) is imported only when a plot is drawn.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional

from .html import (render_arbitration_html, render_calibration_html, render_certificate_html,
                   render_html, render_index_html)
from .junit import render_junit
from .markdown import render_markdown


def _write(path: str, text: str) -> str:
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def write_reports(run: Mapping[str, Any], *, html: Optional[str] = None,
                  junit: Optional[str] = None, markdown: Optional[str] = None) -> list[str]:
    """Write the requested reports of ``run``; returns the paths written."""
    written = []
    if html:
        written.append(_write(html, render_html(run)))
    if junit:
        written.append(_write(junit, render_junit(run)))
    if markdown:
        written.append(_write(markdown, render_markdown(run)))
    return written


__all__ = ["write_reports", "render_html", "render_junit", "render_markdown",
           "render_calibration_html", "render_certificate_html", "render_arbitration_html",
           "render_index_html"]
