"""JUnit XML: one test case per contract; violations are failures, kernel or
checker errors are errors, contracts out of scope are skipped.

The layout is the one CI systems (Jenkins, GitLab, GitHub test reporters) read:
``<testsuites><testsuite><properties/><testcase classname= name= time=>``.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Mapping

from ._util import (as_float, case_text, class_name, counts, fmt_num, fmt_value, results,
                    signature_code, signature_quantities)

# characters XML 1.0 does not allow, even escaped
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: Any) -> str:
    if isinstance(text, bool):
        text = "true" if text else "false"
    return _INVALID_XML.sub("?", "" if text is None else str(text))


def failure_text(r: Mapping[str, Any]) -> str:
    """The body of a failure: the same fixed shape as the terminal block."""
    v = r.get("violation") or {}
    lines = [f"{r.get('contract', '')} {r.get('id', '')}: {r.get('message', '')}"]
    if v.get("case"):
        lines.append(f"case: {case_text(v['case'])}")
    total = as_float(v.get("total"))
    if total:
        mis = as_float(v.get("mismatched")) or 0
        lines.append(f"mismatched elements: {int(mis)} / {int(total)} ({100 * mis / total:.1f}%)")
    if v.get("index") is not None:
        lines.append(f"worst element {tuple(v['index']) if isinstance(v['index'], list) else v['index']}:"
                     f" actual {fmt_num(v.get('actual'))}, expected {fmt_num(v.get('expected'))}")
    if v.get("measured") is not None or v.get("allowed") is not None:
        lines.append(f"measured |error| {fmt_num(v.get('measured'))}, allowed "
                     f"{fmt_num(v.get('allowed'))}")
    code = signature_code(r)
    if code:
        q = signature_quantities(r)
        shown = "; ".join(f"{k}={fmt_value(val, 100)}" for k, val in q.items())
        lines.append(f"signature: {code}" + (f" — {shown}" if shown else ""))
    if r.get("tolerance"):
        lines.append(f"tolerance: {r['tolerance']}")
    repro = r.get("reproduce") or v.get("reproduce")
    if repro:
        lines.append(f"reproduce: {repro}")
    return "\n".join(lines)


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
    for r in rs:
        verdict = str(r.get("verdict", "error"))
        case = ET.SubElement(suite, "testcase", classname=_clean(f"kcontract.{r.get('contract', '')}"),
                             name=_clean(r.get("id", "")),
                             time=f"{as_float(r.get('seconds')) or 0.0:.3f}")
        title = class_name(r.get("contract", ""))
        if verdict == "violation":
            el = ET.SubElement(case, "failure", message=_clean(r.get("message", "")),
                               type=_clean(signature_code(r) or "violation"))
            el.text = _clean(failure_text(r))
        elif verdict == "error":
            el = ET.SubElement(case, "error", message=_clean(r.get("message", "")),
                               type=_clean(signature_code(r) or "error"))
            tb = (r.get("details") or {}).get("traceback") if isinstance(r.get("details"), Mapping) else None
            el.text = _clean(failure_text(r) + (f"\n\n{tb}" if tb else ""))
        elif verdict == "skipped":
            ET.SubElement(case, "skipped", message=_clean(r.get("message", "")))
        else:
            out = ET.SubElement(case, "system-out")
            out.text = _clean(f"{title}: {r.get('message', '')}"
                              + (f"\ntolerance: {r['tolerance']}" if r.get("tolerance") else ""))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
