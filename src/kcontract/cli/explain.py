"""Readable rendering of one contract (all eight parts) or one class."""
from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table


def explain_contract(c, console: Console) -> None:
    from ..classes import CLASSES
    from ..language.registry import detectors, protocols
    cls = CLASSES[c.cls]
    t = Table(show_header=False, box=None, padding=(0, 1))
    t.add_column(style="bold cyan", no_wrap=True)
    t.add_column(overflow="fold")
    t.add_row("id", c.id)
    t.add_row("class", f"{c.cls} {cls.name} ({cls.family}; primitive: {cls.primitive})")
    t.add_row("promise", cls.promise)
    if c.description:
        t.add_row("description", " ".join(c.description.split()))
    scope = f"op {c.scope.op}; dtypes {', '.join(c.scope.dtypes)}; frameworks {', '.join(c.scope.frameworks)}"
    if c.scope.requires:
        scope += "; applies when " + ", ".join(f"{k}={getattr(v, 'name', v)}"
                                             for k, v in c.scope.requires.items())
    t.add_row("scope", scope)
    if c.claims:
        t.add_row("claims", ", ".join(c.claims))
    t.add_row("precondition", c.precondition.source if c.precondition is not None else "(none)")
    t.add_row("postcondition", c.postcondition.source)
    t.add_row("tolerance", "\n".join(f"{k} = {e.source}" for k, e in c.tolerance.items()))
    t.add_row("oracle", c.oracle)
    p = c.protocol
    spec = protocols().get(p.kind)
    proto = f"{p.kind}: {spec.description if spec else ''}\nseed {p.seed}, trials {p.trials}, " \
            f"families {', '.join(p.families)}"
    if p.shapes:
        proto += "\nshapes " + "; ".join(",".join(f"{k}={v}" for k, v in s.items()) for s in p.shapes)
    if p.params:
        proto += "\nparams " + ", ".join(f"{k}={v}" for k, v in p.params.items())
    t.add_row("protocol", proto)
    sig = f"{c.cls}.{c.signature.code}: {c.signature.summary}"
    if c.signature.detector:
        d = detectors().get(c.signature.detector)
        sig += f"\ndetector {c.signature.detector}" + (f": {d.description}" if d and d.description else "")
    t.add_row("signature", sig)
    if c.source:
        import os
        t.add_row("source", os.path.basename(c.source))
    console.print(Panel(t, title=f"[bold]{c.id}[/bold] — {c.title}", title_align="left"))


def explain_class(cls, contracts, console: Console) -> None:
    t = Table(show_header=False, box=None, padding=(0, 1))
    t.add_column(style="bold cyan", no_wrap=True)
    t.add_column(overflow="fold")
    t.add_row("family", cls.family)
    t.add_row("primitive", cls.primitive)
    t.add_row("promise", cls.promise)
    t.add_row("violation signature", cls.signature)
    t.add_row("contracts", "\n".join(f"{c.id} ({c.op}): {c.title}" for c in contracts) or "(none)")
    console.print(Panel(t, title=f"[bold]{cls.id}[/bold] — {cls.name}", title_align="left"))
