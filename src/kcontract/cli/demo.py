"""``kcontract demo``: the case studies, a dispute between two stacks, and the calibration
of the suite."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from rich.console import Console
from rich.rule import Rule
from rich.text import Text

from ..errors import UsageError
from ..files import write_json, write_text
from ..report import render_arbitration_html, render_index_html, write_reports


#: the demo's plan in the examples folder: the case studies and the disputes, as data
PLAN = "demo.yaml"


@dataclass(frozen=True)
class CaseStudy:
    key: str
    title: str
    story: str
    kernel: str  # relative to the examples folder
    op: str
    dtype: str
    classes: tuple
    expect: str  # "violation" | "conformant"
    declare: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Dispute:
    """One op of examples/dispute: recorded on both stacks under one contract class."""
    op: str
    cls: str
    at_fault: Optional[str]  # the side that must be found at fault; None: they agree


@dataclass(frozen=True)
class Plan:
    base: Path  # the examples folder
    case_studies: tuple
    disputes: tuple


def examples_dir() -> Path:
    for cand in (Path.cwd() / "examples", Path(__file__).resolve().parents[3] / "examples"):
        if (cand / PLAN).is_file():
            return cand
    raise UsageError(f"the examples folder (with {PLAN}) was not found: run the demo from the "
                     "repository root")


def load_plan(base: Optional[Path] = None) -> Plan:
    """examples/demo.yaml: the case studies (one check each, with the verdict it must
    give) and the disputes (with the side that must be at fault)."""
    import yaml
    base = Path(base) if base is not None else examples_dir()
    path = base / PLAN
    data = yaml.safe_load(path.read_text()) or {}
    try:
        cases = tuple(CaseStudy(**dict(c, classes=tuple(c["classes"]),
                                       declare=dict(c.get("declare") or {})))
                      for c in data["case_studies"])
        disputes = tuple(Dispute(d["op"], d["class"], d["at_fault"]) for d in data["disputes"])
    except (KeyError, TypeError) as exc:
        raise UsageError(f"{path}: malformed demo plan ({type(exc).__name__}: {exc})") from None
    bad = [c.key for c in cases if c.expect not in ("violation", "conformant")]
    if bad:
        raise UsageError(f"{path}: expect must be violation or conformant ({', '.join(bad)})")
    return Plan(base, cases, disputes)


def run_case(cs: CaseStudy, base: Path, seed: int = 0):
    from ..check.runner import check
    kernel = str(base / cs.kernel.split(":")[0]) + ":" + cs.kernel.split(":")[1]
    return check(kernel, op=cs.op, dtype=cs.dtype, classes=list(cs.classes), declare=cs.declare,
                 seed=seed)


def diagnosis(run) -> str:
    """The run's primary cause(s), with how many other violations follow from them."""
    from ..diagnosis.text import summary
    bad = [r for r in run.results if r.verdict.value in ("violation", "error")]
    if not bad:
        n = len(run.results)
        return f"conformant ({n} contract{'s' if n != 1 else ''} pass{'es' if n == 1 else ''})"
    return summary(run.diagnosed())


def run_demo(out: str, *, calibration: bool = True, whole_model: bool = True,
             console: Optional[Console] = None) -> bool:
    console = console or Console()
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = load_plan()
    base = plan.base
    ok = True
    console.print(Rule("[bold]kcontract demo: the case studies"))
    summary = []
    for cs in plan.case_studies:
        run = run_case(cs, base)
        data = run.to_json()
        write_json(str(out_dir / f"{cs.key}.json"), data)
        write_reports(data, html=str(out_dir / f"{cs.key}.html"))
        got = "conformant" if run.verdict == "conformant" else "violation"
        as_expected = got == cs.expect
        ok &= as_expected
        summary.append((cs, run, as_expected))
        console.print(Text(cs.title, style="bold"))
        console.print(f"  {cs.story}")
        console.print(f"  kernel: examples/{cs.kernel}" +
                      (f"  (declared: {', '.join(f'{k}={v}' for k, v in cs.declare.items())})"
                       if cs.declare else ""))
        style = "green" if as_expected else "bold red"
        console.print(Text(f"  diagnosis: {diagnosis(run)}", style=style))
        console.print()
    console.print(Rule("[bold]a dispute between two stacks: who is right?"))
    disputes: list[dict] = []
    disputes_ok = run_dispute(plan, out_dir, console, disputes)
    ok &= disputes_ok
    traces: list[dict] = []
    if whole_model:
        console.print(Rule("[bold]a whole model on two stacks: where do they part, and whose "
                           "fault?"))
        ok &= run_trace_case(base, out_dir, console, traces)
    cal_row = None
    if calibration:
        from .suite_cmds import calibration_table, run_calibration, write_calibration
        console.print(Rule("[bold]calibration of the normative suite"))
        cals = run_calibration([], [], console)
        console.print(calibration_table(cals))
        write_calibration(cals, str(out_dir / "calibration.json"),
                          str(out_dir / "calibration.html"))
        sound = sum(c.sound for c in cals)
        console.print(f"{sound} of {len(cals)} contracts soundly calibrated")
        ok &= sound == len(cals) and len(cals) > 0
        cal_row = {"name": "calibration matrix", "href": "calibration.html",
                   "verdict": "pass" if sound == len(cals) and cals else "violation",
                   "summary": f"{sound} of {len(cals)} contracts soundly calibrated: baseline "
                              "fails the basic test; bad passes it and violates the contract; "
                              "good passes both"}
    _write_index(out_dir, summary, disputes + traces, cal_row)
    console.print(Rule())
    n_ok = sum(1 for _, _, good in summary if good)
    console.print(f"case studies diagnosed as expected: {n_ok} of {len(summary)}")
    console.print("disputes: " + ("each settled against the expected stack" if disputes_ok else
                                  "NOT all settled as expected (see above)"))
    console.print(f"reports written to {out_dir}/ (index.html; one JSON and HTML per case study "
                  "and dispute"
                  + (", calibration.json/.html)" if calibration else ")"))
    return ok


def run_dispute(plan: Plan, out_dir: Path, console: Console,
                rows: Optional[list] = None) -> bool:
    """Record each op on the two emulated stacks of examples/dispute, arbitrate each pair
    and say who is at fault; True when every verdict names the expected side.  ``rows``
    collects one index entry per dispute."""
    from ..records.arbitrate import arbitrate, record
    ok = True
    for d in plan.disputes:
        op, cls, expected = d.op, d.cls, d.at_fault
        recs = [record(f"{plan.base / 'dispute' / f'stack_{side}.py'}:{op}", op=op, dtype="float32",
                       classes=[cls]) for side in ("a", "b")]
        arb = arbitrate(recs[0], recs[1], labels=("stack A", "stack B"))
        data = arb.to_json()
        write_json(str(out_dir / f"dispute-{op}.json"), data)
        write_text(str(out_dir / f"dispute-{op}.html"), render_arbitration_html(data))
        at_fault = data.get("violators") or []
        as_expected = at_fault == ([expected] if expected else [])
        ok &= as_expected
        findings = [d["statement"] for d in data.get("disagreements", [])] or ["the stacks agree"]
        if rows is not None:
            rows.append({"name": f"{op}: stack A vs stack B", "href": f"dispute-{op}.html",
                         "verdict": "violation" if at_fault else "conformant",
                         "summary": ("" if as_expected else "NOT AS EXPECTED: ")
                         + "; ".join(findings)})
        console.print(Text(f"{op}: {', '.join(at_fault) or 'neither stack'} at fault",
                           style="bold"))
        for f in findings:
            console.print(Text(f"  {f}", style="green" if as_expected else "bold red"))
        console.print()
    return ok


def run_trace_case(base: Path, out_dir: Path, console: Console, rows: list) -> bool:
    """examples/tiny_lm: trace, compare, attribute (kcontract.trace.demo); True when the
    comparisons say what they must (skipped, and True, where torch is not installed)."""
    from . import demo_tiny_lm as trace_demo
    try:
        import torch  # noqa: F401
    except ImportError:
        rows += trace_demo.index_rows(None, "torch is not installed")
        console.print(Text("skipped: torch is not installed", style="yellow"))
        return True
    from ..trace.report import summary_lines
    outcome = trace_demo.run(base, out_dir)
    rows += trace_demo.index_rows(outcome)
    for line in summary_lines(outcome.data):
        console.print(Text(f"  {line}", style="green" if outcome.ok else "bold red"))
    console.print(Text("  reference vs reference: " + summary_lines(outcome.same)[1]
                       + ("" if not outcome.same["violators"] else " (VIOLATIONS)"),
                       style="green" if outcome.ok else "bold red"))
    for p in outcome.problems:
        console.print(Text(f"  NOT AS EXPECTED: {p}", style="bold red"))
    console.print()
    return outcome.ok


def _write_index(out_dir: Path, summary, disputes: list, cal_row: Optional[dict]) -> None:
    """out/demo/index.html: every report the demo wrote, with its verdict, one click away."""
    cases = [{"name": cs.title, "href": f"{cs.key}.html", "verdict": run.verdict,
              "summary": ("" if good else f"NOT AS EXPECTED ({cs.expect} expected): ")
              + diagnosis(run)} for cs, run, good in summary]
    sections = [("Case studies", cases), ("A dispute between two stacks", disputes)]
    if cal_row:
        sections.append(("The normative suite", [cal_row]))
    write_text(str(out_dir / "index.html"), render_index_html(
        "kcontract demo", "Case studies diagnosed by the normative suite, a dispute settled by "
        "arbitration, and the suite's own calibration.", sections))
