"""JUnit XML: one test case per contract; violations are failures, kernel or
checker errors are errors, contracts out of scope are skipped.

The layout is the one CI systems (Jenkins, GitLab, GitHub test reporters) read:
``<testsuites><testsuite><properties/><testcase classname= name= time=>``.  The diagnosis
rides along as the terminal prints it: the suite's ``<system-out>`` (each primary cause with its
evidence, the violations it explains folded under it), a ``diagnosis.primary`` property, and
each failure's role first (``[cause: C-PRC-04]``, ``[follows from prc04-matmul]``).
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Mapping

from ._util import (as_float, class_name, counts, results, signature_code, violation_lines)

# characters XML 1.0 does not allow, even escaped
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: Any) -> str:
    if isinstance(text, bool):
        text = "true" if text else "false"
    return _INVALID_XML.sub("?", "" if text is None else str(text))


def failure_text(r: Mapping[str, Any]) -> str:
    """The body of a failure: the terminal's violation block, unindented."""
    return "\n".join(line.strip() for line in violation_lines(r))


def _role_lines(run: Mapping[str, Any], diag, r: Mapping[str, Any]) -> tuple[str, list[str]]:
    """What a failing test case is in the diagnosis: (a prefix for its message, the lines that
    open its body).  A primary cause lists the violations that follow from it; an explained
    violation names the cause it follows from, first."""
    from ..diagnosis.text import place
    where = place(diag, str(r.get("id", "")))
    if where is None:
        return "", []
    i, c, e = where
    if c is None:
        return (f"[follows from {e.by}] ",
                [f"diagnosis: follows from {e.by} ({e.by_class}): {e.reason}"])
    n = len(diag.primary)
    label = f"cause {i} of {n}" if n > 1 else "cause"
    what = "kernel error" if c.kind == "error" else c.cls
    lines = [f"diagnosis: {label} ({what})"
             + (f", shown by {len(c.contracts)} contracts: {', '.join(c.contracts)}"
                if len(c.contracts) > 1 else "")]
    lines += [f"  ↳ {x.contract} follows from it: {x.reason}" for x in diag.consequences(c)]
    return f"[{label}: {what}] ", lines


def render_junit(run: Mapping[str, Any]) -> str:
    """JUnit XML for a run (``RunResult.to_json()``)."""
    c = counts(run)
    rs = results(run)
    name = f"kcontract {run.get('kernel', '?')} op={run.get('op', '?')} dtype={run.get('dtype', '?')}"
    seconds = as_float(run.get("seconds")) or 0.0
    root = ET.Element("testsuites", name="kcontract", tests=str(len(rs)),
                      failures=str(c.get("violation", 0)), errors=str(c.get("error", 0)),
                      skipped=str(c.get("skipped", 0)), time=f"{seconds:.3f}")
    suite = ET.SubElement(root, "testsuite", name=_clean(name), tests=str(len(rs)),
                          failures=str(c.get("violation", 0)), errors=str(c.get("error", 0)),
                          skipped=str(c.get("skipped", 0)), time=f"{seconds:.3f}")
    props = ET.SubElement(suite, "properties")
    env = run.get("environment") or {}
    for key, val in (("kernel", run.get("kernel")), ("kernel_hash", run.get("kernel_hash")),
                     ("op", run.get("op")), ("dtype", run.get("dtype")),
                     ("framework", run.get("framework")), ("device", run.get("device")),
                     ("device_name", env.get("device_name")),
                     ("suite_version", run.get("suite_version")), ("verdict", run.get("verdict"))):
        if val not in (None, ""):
            ET.SubElement(props, "property", name=key, value=_clean(val))
    for key, val in (run.get("claims") or {}).items():
        ET.SubElement(props, "property", name=f"claim.{key}", value=_clean(val))
    from ..diagnosis.text import cause_lines, of_run
    diag = of_run(run)
    if not diag.empty:
        ET.SubElement(props, "property", name="diagnosis.primary",
                      value=_clean(", ".join("kernel error" if c.kind == "error" else c.cls
                                             for c in diag.primary)))
    for r in rs:
        verdict = str(r.get("verdict", "error"))
        case = ET.SubElement(suite, "testcase", classname=_clean(f"kcontract.{r.get('contract', '')}"),
                             name=_clean(r.get("id", "")),
                             time=f"{as_float(r.get('seconds')) or 0.0:.3f}")
        title = class_name(r.get("contract", ""))
        prefix, head = _role_lines(run, diag, r) if verdict in ("violation", "error") else ("", [])
        body = "\n".join(head + [""]) if head else ""
        if verdict == "violation":
            el = ET.SubElement(case, "failure", message=_clean(prefix + str(r.get("message", ""))),
                               type=_clean(signature_code(r) or "violation"))
            el.text = _clean(body + failure_text(r))
        elif verdict == "error":
            el = ET.SubElement(case, "error", message=_clean(prefix + str(r.get("message", ""))),
                               type=_clean(signature_code(r) or "error"))
            tb = (r.get("details") or {}).get("traceback") if isinstance(r.get("details"), Mapping) else None
            el.text = _clean(body + failure_text(r) + (f"\n\n{tb}" if tb else ""))
        elif verdict == "skipped":
            ET.SubElement(case, "skipped", message=_clean(r.get("message", "")))
        else:
            out = ET.SubElement(case, "system-out")
            out.text = _clean(f"{title}: {r.get('message', '')}"
                              + (f"\ntolerance: {r['tolerance']}" if r.get("tolerance") else ""))
    if not diag.empty:
        # the whole diagnosis once, cause first (what CI shows as the suite's output)
        out = ET.SubElement(suite, "system-out")
        out.text = _clean("\n".join(line for _, line in cause_lines(run, diag)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
