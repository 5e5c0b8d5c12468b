"""The whole-model case study of ``kcontract demo`` (``examples/tiny_lm``): the same small
language model traced on a reference stack, on a stack with ``medium`` float32 matmul
precision and a clamping embedding, and on the reference stack again; the two
comparisons and what they must find."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..files import write_json, write_text

TRIALS = 6
REFERENCE, STACK = "reference", "medium+clamp"


@dataclass
class Outcome:
    ok: bool
    problems: list
    data: dict  # the reference vs stack comparison
    same: dict  # the reference vs reference comparison


def expectations(data: dict, same: dict) -> list[str]:
    """What the comparisons must say; the problems found (empty: all as expected)."""
    problems = []
    if data.get("violators") != [STACK]:
        problems.append(f"violators {data.get('violators')}, expected [{STACK!r}]")
    sites = [s for s in data["sites"] if s["violations"]]
    matmuls = [s for s in sites if s["kcontract_op"] == "matmul"]
    if not matmuls:
        problems.append("no matmul attributed")
    for s in matmuls:
        classes = {v["contract_class"] for v in s["violations"]}
        formats = {v.get("operand_format") for v in s["violations"]}
        if not classes & {"C-PRC-01", "C-PRC-04"} or formats - {"bfloat16", "tfloat32"}:
            problems.append(f"{s['module']}: {classes}, operands {formats}")
    emb = [s for s in sites if s["kcontract_op"] == "embedding"]
    if not emb or {v["contract_class"] for s in emb for v in s["violations"]} != {"C-EXC-02"}:
        problems.append("the clamping embedding is not attributed to C-EXC-02")
    if any(v["side"] != STACK for s in sites for v in s["violations"]):
        problems.append("a violation on the reference side")
    ag = same["agreement"]
    if same.get("violators") or same["ops_differing"] or ag["next_token"]["percent"] != 100.0 \
            or ag["top1"]["percent"] != 100.0:
        problems.append("two traces of the reference stack do not agree 100 %")
    return problems


def run(base: Path, out_dir: Path, trials: int = TRIALS) -> Outcome:
    from ..trace.compare import compare_traces
    from ..trace.process import trace_model
    from ..trace.report import render_html
    folder = base / "tiny_lm"
    model = str(folder / "model.py")
    ref = trace_model(model, trials=trials, label=REFERENCE)
    stack = trace_model(model, trials=trials, prelude=str(folder / "stack_medium_clamp.py"),
                        label=STACK)
    again = trace_model(model, trials=trials, label=REFERENCE + " (again)")
    for name, tr in (("reference", ref), ("medium_clamp", stack), ("reference_again", again)):
        tr.save(str(out_dir / f"trace-{name}.kct"))
    data = compare_traces(ref, stack).to_json()
    same = compare_traces(ref, again).to_json()
    write_json(str(out_dir / "trace-tiny_lm.json"), data)
    write_text(str(out_dir / "trace-tiny_lm.html"), render_html(data))
    write_text(str(out_dir / "trace-tiny_lm-same.html"), render_html(same))
    problems = expectations(data, same)
    return Outcome(not problems, problems, data, same)


def index_rows(outcome: Optional[Outcome], why: str = "") -> list[dict]:
    if outcome is None:
        return [{"name": "tiny language model: reference vs medium+clamp", "href": "index.html",
                 "verdict": "skipped", "summary": why}]
    from ..trace.report import agreement_text
    d = outcome.data
    summary = ("" if outcome.ok else "NOT AS EXPECTED: " + "; ".join(outcome.problems) + ". ") \
        + agreement_text(d["agreement"]) + "; " + "; ".join(
            f"{c['side']} violates {c['contract_class']} at {c['module']} ({c['trials']} trials)"
            for c in d.get("primary_causes") or [])
    return [{"name": "tiny language model: reference vs medium+clamp",
             "href": "trace-tiny_lm.html", "verdict": "violation" if d["violators"] else "conformant",
             "summary": summary},
            {"name": "tiny language model: reference vs reference", "href": "trace-tiny_lm-same.html",
             "verdict": "violation" if outcome.same["violators"] else "conformant",
             "summary": agreement_text(outcome.same["agreement"])}]
