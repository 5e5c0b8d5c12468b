"""Certification: conformance levels over the contract families, and certificates.

A level names the contract classes a kernel must satisfy; each level contains
the one below it:

======  ============  ===========================================================
level   name          classes
======  ============  ===========================================================
1       robust        exceptional values (C-EXC-01, C-EXC-02) and shape
                      polymorphism (C-CMP-03): right answers or the declared
                      behaviour on every input and every shape of the class
2       accurate      level 1 plus precision (C-PRC-01 .. C-PRC-04): as accurate
                      as the declared formats make it
3       reproducible  level 2 plus ordering and determinism (C-ORD-01 .. C-ORD-03)
                      and compiler invariance (C-CMP-01, C-CMP-02): the same
                      answer within a computable bound whatever the schedule,
                      configuration, batch or run
======  ============  ===========================================================

Within a level, every contract the suite has for the op must pass; contracts
that do not apply (out of scope for the dtype or framework, or requiring a
claim the kernel does not make) are skipped and listed; classes with no
contract for the op are listed as not applicable.  A certificate is issued
only if at least one contract ran and passed.

The certificate is JSON (and an HTML rendering) naming the suite version, the
environment, the kernel's source hash, the claims, the seed and every verdict.
``content_hash`` is the sha256 of the canonical serialisation of everything
else (:func:`canonical_bytes`: JSON, keys sorted, no whitespace, UTF-8), so any
edit is detected; ``verify_certificate`` re-checks it, the kernel's source hash
when the kernel file is reachable, and, with ``rerun=True``, reproduces every
verdict on this machine (same seed).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping, Optional, Sequence

from . import __version__
from .check.verdict import jsonable
from .check.worker import is_path_spec, source_sha256
from .errors import UsageError
from .files import load_json, write_json, write_text

CERT_SCHEMA = "kcontract.certificate/1"
HASH_ALGORITHM = "sha256 over canonical JSON (sorted keys, no whitespace, UTF-8), content_hash excluded"

_L1 = ("C-EXC-01", "C-EXC-02", "C-CMP-03")
_L2 = _L1 + ("C-PRC-01", "C-PRC-02", "C-PRC-03", "C-PRC-04")
_L3 = _L2 + ("C-ORD-01", "C-ORD-02", "C-ORD-03", "C-CMP-01", "C-CMP-02")
LEVELS: dict[int, tuple[str, ...]] = {1: _L1, 2: _L2, 3: _L3}
LEVEL_NAMES = {1: "robust", 2: "accurate", 3: "reproducible"}
OK_VERDICTS = ("pass", "skipped")


def level_classes(level: int) -> tuple[str, ...]:
    if level not in LEVELS:
        raise UsageError(f"--level must be one of {', '.join(map(str, LEVELS))}, not {level!r}")
    return LEVELS[level]


def canonical_bytes(cert: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in cert.items() if k != "content_hash"}
    return json.dumps(jsonable(body), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def content_hash(cert: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_bytes(cert)).hexdigest()


def achieved_level(verdicts: Sequence[Mapping[str, Any]], up_to: int) -> int:
    """The highest level <= ``up_to`` whose classes all pass (or are skipped)."""
    best = 0
    for lvl in range(1, up_to + 1):
        classes = set(LEVELS[lvl])
        if all(v["verdict"] in OK_VERDICTS for v in verdicts if v["contract"] in classes):
            best = lvl
        else:
            break
    return best


def certify(kernel: str, *, op: str, dtype: str, level: int, framework: str = "numpy",
            device: str = "cpu", declare: Optional[Mapping[str, Any]] = None, seed: int = 0,
            timeout: float = 60.0, contracts=None, progress=None) -> dict:
    """Run what ``level`` needs and return the certificate (a dict, hashed)."""
    from .check.runner import check
    classes = level_classes(level)
    run = check(kernel, op=op, dtype=dtype, framework=framework, device=device,
                classes=list(classes), declare=declare, seed=seed, timeout=timeout,
                contracts=contracts, progress=progress)
    data = run.to_json()
    verdicts = [{"contract": r["contract"], "id": r["id"], "verdict": r["verdict"],
                 "signature": (r.get("signature") or {}).get("code") or "",
                 "message": r.get("message", ""), "tolerance": r.get("tolerance", ""),
                 "cases": r.get("cases", 0)} for r in data["results"]]
    achieved = achieved_level(verdicts, level)
    ran = run.nothing_checked() is None  # every contract skipped certifies nothing
    target, _, _ = kernel.rpartition(":")
    cert = {
        "schema": CERT_SCHEMA,
        "issued": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "level": level, "level_name": LEVEL_NAMES[level],
        "levels": {str(k): list(v) for k, v in LEVELS.items()},
        "level_names": {str(k): v for k, v in LEVEL_NAMES.items()},
        "certified": bool(ran and achieved >= level),
        "level_achieved": achieved if ran else 0,
        "kernel": {"spec": kernel, "module": target,
                   "file": os.path.basename(target) if target.endswith(".py") else "",
                   "sha256": data.get("kernel_hash", "")},
        "op": op, "dtype": data["dtype"], "framework": framework, "device": device,
        "claims": data.get("claims"), "declare": {k: str(v) for k, v in (declare or {}).items()},
        "seed": int(seed), "suite_version": data.get("suite_version"),
        "kcontract_version": __version__, "environment": data.get("environment"),
        "verdicts": verdicts,
        "not_applicable": [c for c in classes if c not in {r.contract for r in run.results}],
        "hash_algorithm": HASH_ALGORITHM,
    }
    cert = jsonable(cert)
    cert["content_hash"] = content_hash(cert)
    return cert


def write_certificate(cert: Mapping[str, Any], path: str, html: Optional[str] = None) -> list[str]:
    from .report.html import render_certificate_html
    written = [write_json(path, cert)]
    if html:
        written.append(write_text(html, render_certificate_html(cert)))
    return [p for p in written if p]


def load_certificate(path: str) -> dict:
    cert = load_json(path, "certificate")
    if not isinstance(cert, dict):
        raise UsageError(f"{path} is not a certificate (not a JSON object)")
    return cert


# -- verification -----------------------------------------------------------------------------

@dataclass
class Check:
    name: str
    ok: Optional[bool]  # None: could not be checked here (not a failure)
    message: str


@dataclass
class Verification:
    path: str
    checks: list = field(default_factory=list)
    rerun: list = field(default_factory=list)  # (id, certified verdict, verdict here)

    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1


def kernel_source(spec: str, cert_dir: str = "", file_hint: str = "") -> Optional[str]:
    """The kernel's source file if it can be found from here, else None."""
    target = spec.rpartition(":")[0]
    if not target:
        return None
    if is_path_spec(target):
        cands = [target]
        if not os.path.isabs(target):
            cands.append(os.path.join(cert_dir, target))
        if file_hint:
            cands.append(os.path.join(cert_dir, file_hint))
        for c in cands:
            if os.path.isfile(c):
                return c
        return None
    try:
        found = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        return None
    origin = getattr(found, "origin", None) if found else None
    return origin if origin and os.path.isfile(origin) else None


def verify_certificate(path: str, *, rerun: bool = False, kernel: Optional[str] = None,
                       timeout: float = 60.0, contracts=None) -> Verification:
    """Check a certificate's integrity (content hash, kernel source hash) and, with
    ``rerun``, reproduce its verdicts here.  ``kernel`` overrides where the kernel is."""
    cert = load_certificate(path)
    ver = Verification(path)
    if cert.get("schema") != CERT_SCHEMA:
        ver.checks.append(Check("schema", False, f"unknown schema {cert.get('schema')!r} "
                                                 f"(expected {CERT_SCHEMA})"))
        return ver
    claimed = cert.get("content_hash")
    actual = content_hash(cert)
    if claimed != actual:
        ver.checks.append(Check("content hash", False,
                                f"the certificate was modified after it was issued: content hash "
                                f"{str(claimed)[:16]}… does not match its content ({actual[:16]}…)"))
        return ver  # nothing else in it can be trusted
    ver.checks.append(Check("content hash", True, f"sha256 {actual[:16]}… matches the content"))
    info = cert.get("kernel") or {}
    spec = kernel or info.get("spec", "")
    # the certificate's own file name is a fallback for its own spec, never for an override
    src = kernel_source(spec, os.path.dirname(os.path.abspath(path)),
                        "" if kernel else info.get("file", ""))
    if src is None:
        ver.checks.append(Check("kernel source", None,
                                f"kernel source of {spec} not reachable from here: not checked"))
    else:
        h = source_sha256(src)
        if h == info.get("sha256"):
            ver.checks.append(Check("kernel source", True, f"{src}: sha256 matches"))
        else:
            ver.checks.append(Check("kernel source", False,
                                    f"{src} has sha256 {h[:16]}…, the certificate names "
                                    f"{str(info.get('sha256'))[:16]}…: the kernel changed since"))
    level = int(cert.get("level", 0) or 0)
    verdicts = cert.get("verdicts") or []
    if bool(cert.get("certified")) and level in LEVELS:
        covered = {v.get("contract") for v in verdicts} | set(cert.get("not_applicable") or [])
        missing = [c for c in LEVELS[level] if c not in covered]
        if achieved_level(verdicts, level) < level or missing:
            why = (f"no verdict for {', '.join(missing)}" if missing else
                   "a verdict of the level is not a pass")
            ver.checks.append(Check("verdicts", False, f"certified at level {level}, but its own "
                                                       f"verdicts do not reach it ({why})"))
    if rerun:
        _rerun(cert, ver, spec if src is None or kernel else _rerun_spec(spec, src), timeout,
               contracts)
    return ver


def _rerun_spec(spec: str, src: str) -> str:
    target, _, fn = spec.rpartition(":")
    if is_path_spec(target):
        return f"{src}:{fn}"
    return spec


def _rerun(cert: Mapping[str, Any], ver: Verification, spec: str, timeout: float,
           contracts) -> None:
    from .check.runner import check
    level = int(cert.get("level", 0) or 0)
    run = check(spec, op=cert["op"], dtype=cert["dtype"], framework=cert.get("framework", "numpy"),
                device=cert.get("device", "cpu"), classes=list(level_classes(level)),
                declare=cert.get("declare") or {}, seed=int(cert.get("seed", 0)), timeout=timeout,
                contracts=contracts)
    here = {r.id: r.verdict.value for r in run.results}
    then = {v["id"]: v["verdict"] for v in cert.get("verdicts") or []}
    differ = []
    for cid in list(dict.fromkeys(list(then) + list(here))):
        a, b = then.get(cid, "absent"), here.get(cid, "absent")
        ver.rerun.append((cid, a, b))
        if a != b:
            differ.append(f"{cid}: certified {a}, here {b}")
    if run.kernel_hash and run.kernel_hash != (cert.get("kernel") or {}).get("sha256"):
        differ.append("the kernel that ran here has a different source hash")
    if differ:
        ver.checks.append(Check("rerun", False, "not reproduced on this machine: " + "; ".join(differ)))
    else:
        ver.checks.append(Check("rerun", True, f"all {len(here)} verdicts reproduced on this "
                                               "machine"))


__all__ = ["LEVELS", "LEVEL_NAMES", "CERT_SCHEMA", "certify", "write_certificate",
           "load_certificate", "verify_certificate", "content_hash", "canonical_bytes",
           "achieved_level", "Verification", "Check", "level_classes"]
