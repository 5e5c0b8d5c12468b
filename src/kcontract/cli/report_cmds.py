"""``kcontract report | history | certify | verify-certificate | record | arbitrate``.

Exit codes as everywhere: 0 success, 1 a violation / a failed verification / a
rejected certificate / a side at fault, 2 a usage error.
"""
from __future__ import annotations

import json
import os
import sys

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..language.claims import parse_declarations
from ..adapters import FRAMEWORKS
from ..errors import UsageError
from ..files import load_json, write_json, write_text
from . import EXIT_FAIL, EXIT_OK, main
from .render import STYLE

#: verdict styles of the terminal, plus "absent" (a contract one side of a comparison lacks)
VERDICT_STYLE = {**STYLE, "absent": "dim"}


def _console() -> Console:
    return Console(highlight=False)


# -- report ----------------------------------------------------------------------------

@main.command("report")
@click.argument("run_json", required=False, type=click.Path(dir_okay=False))
@click.option("--html", type=click.Path(dir_okay=False), help="write the HTML report here")
@click.option("--junit", type=click.Path(dir_okay=False), help="write JUnit XML here ('-': stdout)")
@click.option("--markdown", type=click.Path(dir_okay=False),
              help="write the Markdown summary here ('-': stdout)")
@click.option("--id", "run_id", type=int, help="render run ID from the results store instead")
@click.option("--store", type=click.Path(dir_okay=False), help="the results store (with --id)")
def report_command(run_json, html, junit, markdown, run_id, store):
    """Render a saved run (the JSON written by `kcontract check --json`, or run --id
    from the results store) as HTML, JUnit XML and/or Markdown.  With no output
    option, writes the HTML beside the JSON (RUN.html)."""
    from ..report import write_reports
    if run_id is not None:
        from ..records.store import StoreError, load_run
        try:
            run = load_run(run_id, store)
        except StoreError as exc:
            raise UsageError(str(exc))
        base = f"run-{run_id}"
    elif run_json:
        run = load_json(run_json, "run")
        base = os.path.splitext(run_json)[0]
    else:
        raise UsageError("give a run's JSON file, or --id N for a stored run")
    if not isinstance(run, dict) or not isinstance(run.get("results"), list):
        raise UsageError(f"{run_json or run_id} is not a kcontract run (expected the JSON of "
                         "`kcontract check --json`, schema kcontract.run/1)")
    if not (html or junit or markdown):
        html = base + ".html"
    for p in write_reports(run, html=html, junit=junit, markdown=markdown):
        click.echo(f"wrote {p}", err=True)
    sys.exit(EXIT_OK)


# -- history ---------------------------------------------------------------------------

@main.command("history")
@click.option("--kernel", help="only this kernel (its spec, a part of it, or a source-hash prefix)")
@click.option("--op", help="only this op")
@click.option("--store", type=click.Path(dir_okay=False),
              help="results database (default ~/.kcontract/results.db or $KCONTRACT_STORE)")
@click.option("--changes", is_flag=True, help="only runs whose verdicts changed")
@click.option("--limit", default=50, show_default=True, type=int, help="the last N runs (0: all)")
@click.option("--json", "as_json", is_flag=True, help="print the runs as JSON")
def history_command(kernel, op, store, changes, limit, as_json):
    """List recorded runs, oldest first, and show when a kernel's verdict changed."""
    from ..records.store import StoreError, history, resolve
    try:
        entries = history(store, kernel=kernel, op=op)
    except StoreError as exc:
        raise UsageError(str(exc))
    if changes:
        entries = [e for e in entries if e.changes]
    if limit and limit > 0:
        entries = entries[-limit:]
    if as_json:
        click.echo(json.dumps([e.to_json() for e in entries], indent=2))
        sys.exit(EXIT_OK)
    con = _console()
    if not entries:
        con.print(f"no runs recorded in {resolve(store)}"
                  + (" matching the filters" if kernel or op else ""))
        sys.exit(EXIT_OK)
    t = Table(title=f"runs in {resolve(store)}", title_justify="left")
    wide = con.width >= 120
    cols = ["id", "when (UTC)", "kernel", "op/dtype"] + (["where"] if wide else []) + \
        ["verdict", "p/v/e/s"] + (["suite"] if wide else [])
    for col in cols:
        t.add_column(col, overflow="fold", no_wrap=col in ("id", "when (UTC)", "verdict", "p/v/e/s"))
    for e in entries:
        c = e.counts
        mark = " *" if e.verdict_changed else ""
        row = [str(e.id), e.recorded_at[:19].replace("T", " "), e.kernel, f"{e.op}/{e.dtype}"]
        row += [f"{e.framework}/{e.device}"] if wide else []
        row += [Text(e.verdict + mark, style=VERDICT_STYLE.get(e.verdict, "")),
                f"{c['pass']}/{c['violation']}/{c['error']}/{c['skipped']}"]
        row += [e.suite_version] if wide else []
        t.add_row(*row)
    con.print(t)
    changed = [e for e in entries if e.changes]
    if changed:
        con.print("changes since the previous run of the same kernel, op, dtype and device:")
        for e in changed:
            con.print(Text(f"  #{e.id} {e.recorded_at[:19].replace('T', ' ')} {e.kernel}: "
                           + "; ".join(e.changes),
                           style="bold yellow" if e.verdict_changed else ""), soft_wrap=True)
    flips = [e for e in entries if e.verdict_changed]
    if flips:
        con.print(f"verdict changed in {len(flips)} run(s) (marked *): " + ", ".join(
            f"#{e.id}" for e in flips))
    sys.exit(EXIT_OK)


# -- certify ---------------------------------------------------------------------------

@main.command("certify")
@click.argument("kernel")
@click.option("--op", required=True, help="the op the kernel implements")
@click.option("--dtype", required=True, help="the kernel's dtype")
@click.option("--level", required=True, type=int,
              help="conformance level: 1 robust (C-EXC, C-CMP-03), 2 accurate (+ C-PRC), "
                   "3 reproducible (+ C-ORD, C-CMP-01/02)")
@click.option("--framework", default="numpy", show_default=True, help="a registered framework: " + ", ".join(FRAMEWORKS))
@click.option("--device", default="cpu", show_default=True, help="torch device string")
@click.option("--declare", multiple=True, help="a claim KEY=VALUE (repeatable)")
@click.option("--seed", default=None, type=int,
              help="a public seed added to every contract's seeds (default: a secret one drawn "
                   "for this run and recorded once it is over; level 3 needs the secret one)")
@click.option("--allow-unsandboxed", is_flag=True,
              help="certify level 2 even where bubblewrap is missing (recorded as sandbox: none)")
@click.option("--timeout", default=60.0, type=float, show_default=True, help="seconds per kernel call")
@click.option("--out", default="kcontract-certificate.json", show_default=True,
              type=click.Path(dir_okay=False), help="the certificate (JSON)")
@click.option("--html", type=click.Path(dir_okay=False),
              help="its HTML rendering (default: beside the JSON)")
def certify_command(kernel, op, dtype, level, framework, device, declare, seed, allow_unsandboxed,
                    timeout, out, html):
    """Run what conformance level --level needs and write a certificate (JSON + HTML)
    naming the suite version, the environment, the kernel's source hash, the claims
    and every verdict.  Exit 0 when certified at the level, 1 otherwise (the
    certificate is written either way and says so)."""
    from ..records.certify import certify, write_certificate
    declared = parse_declarations(declare)
    cert = certify(kernel, op=op, dtype=dtype, level=level, framework=framework, device=device,
                   declare=declared, seed=seed, timeout=timeout,
                   allow_unsandboxed=allow_unsandboxed)
    html = html or os.path.splitext(out)[0] + ".html"
    written = write_certificate(cert, out, html)
    con = _console()
    t = Table(title=f"certificate for {kernel} (level {level}, {cert['level_name']})",
              title_justify="left")
    for col in ("class", "contract", "verdict", "signature", "message"):
        t.add_column(col, overflow="fold")
    for v in cert["verdicts"]:
        t.add_row(v["contract"], v["id"], Text(v["verdict"], style=VERDICT_STYLE.get(v["verdict"], "")),
                  v["signature"], v["message"])
    con.print(t)
    if cert["not_applicable"]:
        con.print(f"no contract for {op} in: {', '.join(cert['not_applicable'])}")
    state = (Text(f"certified at level {level}", style="bold green") if cert["certified"] else
             Text(f"not certified at level {level} (achieved: {cert['level_achieved']})",
                  style="bold red"))
    con.print(state)
    con.print(f"sandbox: {cert['sandbox']}; seed {cert['seed']} "
              f"({'secret until now' if cert['secret_seed'] else 'public'})")
    con.print(f"content sha256 {cert['content_hash']}, signed by key "
              f"{cert['signature']['public_key'][:16]}…")
    for p in written:
        click.echo(f"wrote {p}", err=True)
    sys.exit(EXIT_OK if cert["certified"] else EXIT_FAIL)


@main.command("verify-certificate")
@click.argument("cert", type=click.Path(dir_okay=False))
@click.option("--rerun", is_flag=True, help="also reproduce every verdict on this machine")
@click.option("--kernel", help="where the kernel is now (path/to/file.py:function), if it moved")
@click.option("--same-seed", is_flag=True,
              help="rerun with the certificate's seed (default: a fresh secret seed)")
@click.option("--trust-key", multiple=True,
              help="a public key (hex) whose signatures to accept besides this machine's")
@click.option("--timeout", default=60.0, type=float, show_default=True, help="seconds per kernel call")
def verify_certificate_command(cert, rerun, kernel, same_seed, trust_key, timeout):
    """Check a certificate: its content hash, the kernel's source hash when the kernel
    file is reachable, and with --rerun its verdicts on this machine.  Exit 0 when it
    holds, 1 when it is rejected."""
    from ..records.certify import verify_certificate
    ver = verify_certificate(cert, rerun=rerun, kernel=kernel, timeout=timeout,
                             same_seed=same_seed, trust=trust_key)
    con = _console()
    for c in ver.checks:
        mark, style = {True: ("✓", "green"), False: ("✗", "bold red"), None: ("-", "dim")}[c.ok]
        con.print(Text(f"{mark} {c.name}: {c.message}", style=style), soft_wrap=True)
    if ver.rerun:
        t = Table(title="rerun", title_justify="left")
        for col in ("contract", "certified", "here"):
            t.add_column(col)
        for cid, a, b in ver.rerun:
            t.add_row(cid, Text(a, style=VERDICT_STYLE.get(a, "")),
                      Text(b, style=VERDICT_STYLE.get(b, "") if a == b else "bold red"))
        con.print(t)
    con.print(Text("certificate verified" if ver.ok else "certificate REJECTED",
                   style="bold green" if ver.ok else "bold red"))
    sys.exit(ver.exit_code)


# -- record / arbitrate ----------------------------------------------------------------------

@main.command("record")
@click.argument("kernel")
@click.option("--op", required=True, help="the op the kernel implements")
@click.option("--dtype", required=True, help="the kernel's dtype")
@click.option("--framework", default="numpy", show_default=True, help="a registered framework: " + ", ".join(FRAMEWORKS))
@click.option("--device", default="cpu", show_default=True, help="torch device string")
@click.option("--contract", "classes", multiple=True,
              help="contract class ID or contract id (repeatable); default: all that apply")
@click.option("--declare", multiple=True, help="a claim KEY=VALUE (repeatable)")
@click.option("--seed", default=0, type=int, show_default=True, help="added to every contract's seeds")
@click.option("--timeout", default=60.0, type=float, show_default=True, help="seconds per kernel call")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="the recording (.kcr)")
def record_command(kernel, op, dtype, framework, device, classes, declare, seed, timeout, out):
    """Run the measurement protocol on this machine and store the seeds, every call's
    raw output (compressed) and the environment in a recording that `kcontract
    arbitrate` can judge anywhere, without the kernel or its accelerator.  Exit 0
    when the recording is written (whatever the verdicts)."""
    from ..records.arbitrate import record
    declared = parse_declarations(declare)
    rec = record(kernel, op=op, dtype=dtype, framework=framework, device=device,
                 classes=list(classes) or None, declare=declared, seed=seed, timeout=timeout)
    rec.save(out)
    run = rec.run
    con = _console()
    t = Table(title=f"recorded {kernel} (op {op}, dtype {dtype}, {framework}/{device})",
              title_justify="left")
    for col in ("class", "contract", "verdict", "message"):
        t.add_column(col, overflow="fold")
    for r in run.get("results") or []:
        t.add_row(r["contract"], r["id"], Text(r["verdict"], style=VERDICT_STYLE.get(r["verdict"], "")),
                  r.get("message", ""))
    con.print(t)
    size = os.path.getsize(out)
    con.print(f"{len(rec.calls)} calls recorded in {out} ({size / 1024:.0f} KiB); verdict here: "
              f"{run.get('verdict')}")
    sys.exit(EXIT_OK)


@main.command("arbitrate")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="write the arbitration as JSON")
@click.option("--report", "html", type=click.Path(dir_okay=False), help="write it as HTML")
@click.option("--label", "labels", multiple=True, help="names for the two sides (default A, B)")
def arbitrate_command(a, b, json_path, html, labels):
    """Compare two recordings (`kcontract record`) with the float64 oracle: for every
    disagreement, which side violates which contract, or -- when both conform and
    still differ -- their distance against the bound that allows it.  Exit 0 when
    neither side violates a contract, 1 when one does."""
    from ..records.arbitrate import arbitrate
    labels = tuple(labels) if labels else ("A", "B")
    if len(labels) != 2:
        raise UsageError("give --label twice (one per side) or not at all")
    result = arbitrate(a, b, labels=labels)
    data = result.to_json()
    if json_path:
        write_json(json_path, data)
    if html:
        from ..report import render_arbitration_html
        write_text(html, render_arbitration_html(data))
    print_arbitration(data, _console())
    sys.exit(result.exit_code)


def print_arbitration(data: dict, con: Console) -> None:
    A, B = data["a"], data["b"]
    con.print(f"[bold]{A['label']}[/bold] = {A['file']}: {A['kernel']} ({A['framework']}/"
              f"{A['device']}{', ' + A['device_name'] if A.get('device_name') else ''})")
    con.print(f"[bold]{B['label']}[/bold] = {B['file']}: {B['kernel']} ({B['framework']}/"
              f"{B['device']}{', ' + B['device_name'] if B.get('device_name') else ''})")
    con.print(f"op {data['op']}, dtype {data['dtype']}: {data['differing_calls']} of "
              f"{data['calls']} calls differ bitwise")
    t = Table(title_justify="left")
    for col in ("class", "contract", A["label"], B["label"], "differ", "finding"):
        t.add_column(col, overflow="fold")
    for r in data["contracts"]:
        t.add_row(r["contract"], r["id"],
                  Text(r["a_verdict"], style=VERDICT_STYLE.get(r["a_verdict"], "")),
                  Text(r["b_verdict"], style=VERDICT_STYLE.get(r["b_verdict"], "")),
                  str(r["differing_calls"]), r["finding"])
    con.print(t)
    for d in data["disagreements"]:
        style = "bold red" if d["at_fault"] else "yellow"
        con.print(Text(f"• {d['statement']}", style=style), soft_wrap=True)
        if d.get("example"):
            con.print(Text(f"    e.g. {d['example']}"), soft_wrap=True)
    for n in data.get("notes") or []:
        con.print(Text(f"note: {n}", style="dim"), soft_wrap=True)
    causes = data.get("causes") or {}
    if causes.get("statement"):
        con.print(Text(f"primary causes: {causes['statement']}", style="bold"), soft_wrap=True)
    if data["violators"]:
        con.print(Text(f"at fault: {', '.join(data['violators'])}", style="bold red"))
    elif data["agree"]:
        con.print(Text("the recordings agree", style="bold green"))
    else:
        con.print(Text("both sides conform; their differences are within the contracts' bounds",
                       style="bold green"))
