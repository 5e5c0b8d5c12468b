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
environment, the sandbox the kernel ran in, the kernel's source hash and the hash of
every module file its worker loaded (outside the Python installation), the claims,
the seed and every verdict (and the ``recipe`` a failing C-PRC-01/04 recovered, when one
did: :func:`recovered_recipe`).  ``content_hash`` is the sha256 of the canonical
serialisation of everything else (:func:`canonical_bytes`: JSON, keys sorted, no
whitespace, UTF-8), and ``signature`` an Ed25519 signature of the same bytes by this
machine's key (:mod:`kcontract.records.signing`), which no sandboxed worker can read: a
certificate edited and "resealed" with a fresh sha256 is rejected.

Seeds: a certificate is issued from a secret seed by default (drawn per run, recorded
in the certificate once the run is over).  Level 3 is issued only from a sandboxed,
secret-seeded run; levels 2 and 3 need the sandbox (:mod:`kcontract.check.jail`), and
level 2 may be issued without one only with ``allow_unsandboxed`` (recorded).

``verify_certificate`` checks the hash, the signature, the kernel's source and every
listed module file when they are reachable -- without importing or running any of
them -- and, with ``rerun=True``, reproduces every verdict on this machine in the
sandbox, with a fresh secret seed unless ``same_seed``.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping, Optional, Sequence

from .. import __version__
from ..check.sandbox import find_module_file
from ..check.verdict import jsonable
from ..check.worker import is_path_spec, source_sha256
from ..errors import UsageError
from ..files import load_json, write_json, write_text
from .signing import signer, verify as verify_signature

CERT_SCHEMA = "kcontract.certificate/1"
HASH_ALGORITHM = ("sha256 over canonical JSON (sorted keys, no whitespace, UTF-8), content_hash "
                  "and signature excluded; the signature is Ed25519 over the same bytes")
#: fields outside the signed and hashed content
UNSIGNED = ("content_hash", "signature")

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
    body = {k: v for k, v in cert.items() if k not in UNSIGNED}
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


def seal(cert: dict) -> dict:
    """Hash and sign ``cert`` in place (its content: everything but the seal)."""
    cert["content_hash"] = content_hash(cert)
    cert["signature"] = signer().sign(canonical_bytes(cert))
    return cert


def certify(kernel: str, *, op: str, dtype: str, level: int, framework: str = "numpy",
            device: str = "cpu", declare: Optional[Mapping[str, Any]] = None,
            seed: Optional[int] = None, timeout: float = 60.0, contracts=None, progress=None,
            allow_unsandboxed: bool = False, sandbox=None) -> dict:
    """Run what ``level`` needs and return the certificate (a dict, hashed and signed).
    ``seed`` None (the default) draws a secret seed for this run.  Raises
    :class:`UsageError` for level 3 with a public seed or without a sandbox, and for
    level 2 without a sandbox unless ``allow_unsandboxed``."""
    from ..check.jail import detect
    from ..check.runner import check
    classes = level_classes(level)
    secret = seed is None
    seed = secrets.randbelow(2 ** 31 - 1) + 1 if secret else int(seed)
    box = sandbox if sandbox is not None else detect()
    if level >= 3 and not secret:
        raise UsageError("level 3 is issued only from a secret-seeded run: leave out --seed")
    if level >= 2 and not box.isolated and (level >= 3 or not allow_unsandboxed):
        raise UsageError(f"level {level} needs the sandbox (bubblewrap), which is not available "
                         "here" + ("" if level >= 3 else "; pass --allow-unsandboxed to certify "
                                   "level 2 without it (recorded as sandbox: none)"))
    run = check(kernel, op=op, dtype=dtype, framework=framework, device=device,
                classes=list(classes), declare=declare, seed=seed, timeout=timeout,
                contracts=contracts, progress=progress, sandbox=box)
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
        "seed": int(seed), "secret_seed": secret, "sandbox": data.get("sandbox", "none"),
        "unsandboxed_override": bool(allow_unsandboxed and not box.isolated),
        "limits": data.get("limits") or {}, "fp_state": data.get("fp_state", ""),
        "modules": data.get("modules") or [], "suite_version": data.get("suite_version"),
        "kcontract_version": __version__, "environment": data.get("environment"),
        "verdicts": verdicts,
        "not_applicable": [c for c in classes if c not in {r.contract for r in run.results}],
        "hash_algorithm": HASH_ALGORITHM,
    }
    recipe = recovered_recipe(data["results"])
    if recipe is not None:  # signed with the rest
        cert["recipe"] = recipe
    return seal(jsonable(cert))


def recovered_recipe(results: Sequence[Mapping[str, Any]]) -> Optional[dict]:
    """The recipe a failing C-PRC-01/04 recovered for the kernel (its signature's
    ``recovered_recipe``, without the error sweep), or None when none did."""
    from ..report._util import recipe_of
    for r in results:
        rec = recipe_of(r)
        if rec is not None:
            return {"contract": r.get("contract", ""),
                    **{k: v for k, v in rec.items() if k != "sweep"}}
    return None


def write_certificate(cert: Mapping[str, Any], path: str, html: Optional[str] = None) -> list[str]:
    from ..report.html import render_certificate_html
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
    return find_module_file(target)


def level_of(cert: Mapping[str, Any]) -> int:
    try:
        return int(cert.get("level", 0) or 0)
    except (TypeError, ValueError):
        return 0


def verify_certificate(path: str, *, rerun: bool = False, kernel: Optional[str] = None,
                       timeout: float = 60.0, contracts=None, same_seed: bool = False,
                       trust: Sequence[str] = ()) -> Verification:
    """Check a certificate's integrity (content hash, signature, kernel source and module
    hashes) without running or importing any of its code, and, with ``rerun``, reproduce
    its verdicts here in the sandbox (a fresh secret seed unless ``same_seed``).
    ``kernel`` overrides where the kernel is; ``trust``: public keys (hex) to accept
    besides this machine's."""
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
    from .signing import trusted_keys
    ok, why = verify_signature(canonical_bytes(cert), cert.get("signature"),
                               trusted_keys(trust or ()))
    ver.checks.append(Check("signature", ok, why))
    box = cert.get("sandbox", "none")
    if box != "bubblewrap":
        ver.checks.append(Check("sandbox", False if level_of(cert) >= 3 and cert.get("certified")
                                else None, f"the kernel ran without a sandbox (sandbox: {box})"))
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
    _check_modules(cert, ver)
    level = level_of(cert)
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
               contracts, same_seed)
    return ver


def _check_modules(cert: Mapping[str, Any], ver: Verification) -> None:
    """Every module file the certified run loaded, hashed again where it is reachable."""
    mods = cert.get("modules") or []
    if not mods:
        return
    changed, missing = [], 0
    for m in mods:
        p = str((m or {}).get("path", ""))
        if not os.path.isfile(p):
            missing += 1
            continue
        if source_sha256(p) != (m or {}).get("sha256"):
            changed.append(p)
    if changed:
        ver.checks.append(Check("modules", False, f"{len(changed)} of the {len(mods)} module "
                                                  f"files it lists changed: {', '.join(changed)}"))
    elif missing == len(mods):
        ver.checks.append(Check("modules", None, f"none of the {len(mods)} module files it lists "
                                                 "is reachable from here: not checked"))
    else:
        ver.checks.append(Check("modules", True, f"{len(mods) - missing} module file(s) match"
                                + (f" ({missing} not reachable)" if missing else "")))


def _rerun_spec(spec: str, src: str) -> str:
    target, _, fn = spec.rpartition(":")
    if is_path_spec(target):
        return f"{src}:{fn}"
    return spec


def _rerun(cert: Mapping[str, Any], ver: Verification, spec: str, timeout: float,
           contracts, same_seed: bool = False) -> None:
    from ..check.runner import check
    level = level_of(cert)
    seed = int(cert.get("seed", 0)) if same_seed else secrets.randbelow(2 ** 31 - 1) + 1
    run = check(spec, op=cert["op"], dtype=cert["dtype"], framework=cert.get("framework", "numpy"),
                device=cert.get("device", "cpu"), classes=list(level_classes(level)),
                declare=cert.get("declare") or {}, seed=seed, timeout=timeout,
                contracts=contracts)
    if run.sandbox != "bubblewrap":
        ver.checks.append(Check("rerun sandbox", None, f"the rerun ran without a sandbox "
                                                       f"(sandbox: {run.sandbox})"))
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
                                               f"machine ({'the certified' if same_seed else 'a fresh secret'} seed)"))


__all__ = ["seal", "LEVELS", "LEVEL_NAMES", "CERT_SCHEMA", "certify", "write_certificate",
           "load_certificate", "verify_certificate", "content_hash", "canonical_bytes",
           "achieved_level", "Verification", "Check", "level_classes"]
