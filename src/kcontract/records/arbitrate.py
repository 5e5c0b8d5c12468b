"""Recordings and arbitration: settle a disagreement between two stacks.

``record`` runs the measurement protocol on this machine, through a
:class:`RecordingHandle` wrapped around the real isolated kernel, and keeps
every call's outcome (the output array, or that the kernel raised, crashed, or
hung) under a key: the sha256 of the arguments' dtypes, shapes and bytes plus
the keyword arguments.  The protocols are deterministic given their seeds, so
the recording is enough to run them again anywhere: ``arbitrate`` replays each
recording through a :class:`ReplayHandle` that serves the recorded outcomes by
key (no kernel, no accelerator needed) and judges them with this machine's
float64 oracle.

For every call on which the two recordings differ bitwise, arbitration says
which side violates which contract (with the signature), or -- when both
conform and still differ -- the distance between them against the bound that
allows it (``|A - B| <= tol_A + tol_B``: each side lies within its tolerance of
the oracle).

The ``.kcr`` file is a zip archive (deflate-compressed) holding
``manifest.json`` (kernel, kernel hash, op, dtype, framework, device, claims,
seed, suite version, environment, the recorded run's verdicts, and one entry
per call) and ``out/NNNNNN.bin``, the raw bytes of each output array.
"""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from .. import __version__
from ..check.sandbox import CallResult
from ..check.verdict import jsonable
from ..errors import UsageError

KCR_SCHEMA = "kcontract.recording/1"
ARBITRATION_SCHEMA = "kcontract.arbitration/1"
BAD = ("violation", "error")


class ReplayError(UsageError):
    """A recording does not cover a call the protocol makes now (recorded with
    another suite version or other options), or the file is not a recording."""


# -- call keys -------------------------------------------------------------------------

def call_key(args: Sequence[Any], kwargs: Optional[Mapping[str, Any]] = None,
             layout: Optional[str] = None) -> str:
    """sha256 over the arguments' dtypes, shapes and bytes, the keyword arguments and the
    memory layout the inputs were given in (if not contiguous)."""
    h = hashlib.sha256()
    if layout:
        h.update(f"layout={layout}|".encode())
    for a in args:
        arr = np.ascontiguousarray(np.asarray(a))
        h.update(f"{arr.dtype.name}|{arr.shape}|".encode())
        h.update(arr.tobytes())
        h.update(b"\x00")
    h.update(json.dumps(jsonable(dict(kwargs or {})), sort_keys=True, default=repr).encode())
    return h.hexdigest()


@dataclass
class RecordedCall:
    key: str
    occurrence: int  # the n-th call with this key (repeated calls, e.g. determinism)
    result: CallResult
    contracts: list = field(default_factory=list)  # contract ids whose protocol made it


def _copy_result(r: CallResult) -> CallResult:
    """A call's outcome, its output and metadata copied (what is stored or served must not
    share memory with what a protocol goes on to use)."""
    return replace(r, out=None if r.out is None else np.array(r.out), meta=dict(r.meta or {}),
                   flags=list(r.flags or []))


class _Attributing:
    """Assigns calls to the contract whose protocol made them (through the runner's
    progress callback: it names the contract after each call and at its end)."""

    def __init__(self):
        self.calls: list[RecordedCall] = []
        self._pending: list[RecordedCall] = []
        self._seen: Counter = Counter()

    def _note(self, key: str, res: CallResult) -> RecordedCall:
        rc = RecordedCall(key, self._seen[key], res)
        self._seen[key] += 1
        self.calls.append(rc)
        self._pending.append(rc)
        return rc

    def attribute(self, contract_id: str, _step: int = 0) -> None:
        for rc in self._pending:
            if contract_id not in rc.contracts:
                rc.contracts.append(contract_id)
        self._pending = []


class RecordingHandle(_Attributing):
    """Wraps a kernel handle (``KernelProcess``); logs every call's outcome by key."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    @property
    def info(self) -> dict:
        return self.inner.info

    def start(self) -> dict:
        return self.inner.start()

    def close(self) -> None:
        self.inner.close()

    def call(self, args, kwargs=None, **kw) -> CallResult:
        res = self.inner.call(args, kwargs, **kw)
        self._note(call_key(args, kwargs, kw.get("layout")), _copy_result(res))
        return res

    def __getattr__(self, name):  # restarts, output_tail, ... of the real handle
        return getattr(self.inner, name)


class ReplayHandle(_Attributing):
    """Serves a recording's outcomes by call key; no kernel is ever run."""

    def __init__(self, recording: "Recording", capture: Iterable[tuple] = ()):
        super().__init__()
        self.recording = recording
        self.info = dict(recording.manifest.get("kernel_info") or {})
        self.restarts = 0
        self._by_call = {(rc.key, rc.occurrence): rc for rc in recording.calls}
        self._capture = set(capture)
        self.captured: dict[tuple, tuple] = {}  # (key, n) -> (args, kwargs)

    def start(self) -> dict:
        return self.info

    def close(self) -> None:
        pass

    def output_tail(self, n: int = 2000) -> str:
        return ""

    def call(self, args, kwargs=None, *, layout=None, **_) -> CallResult:
        key = call_key(args, kwargs, layout)
        n = self._seen[key]
        rc = self._by_call.get((key, n))
        if rc is None:
            # never serve another call's outcome (that would hide nondeterminism)
            m = self.recording.manifest
            raise ReplayError(
                f"{self.recording.label}: the recording has no outcome for a call the protocol "
                f"makes now (call #{len(self.calls) + 1}, key {key[:12]}, occurrence {n}); it "
                f"was recorded with suite {m.get('suite_version')} (kcontract "
                f"{m.get('kcontract_version')}) -- record it again with this version")
        self._note(key, rc.result)
        if (key, n) in self._capture:
            self.captured[(key, n)] = ([np.array(a) for a in args], dict(kwargs or {}))
        return _copy_result(rc.result)


# -- the .kcr file -----------------------------------------------------------------------

@dataclass
class Recording:
    manifest: dict
    calls: list
    path: str = ""

    @property
    def label(self) -> str:
        return os.path.basename(self.path) if self.path else str(self.manifest.get("kernel", "?"))

    @property
    def run(self) -> dict:
        return self.manifest.get("run") or {}

    def save(self, path: str) -> str:
        entries = []
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        tmp = path + ".tmp"
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for i, rc in enumerate(self.calls):
                r = rc.result
                entry = {"key": rc.key, "n": rc.occurrence, "status": r.status,
                         "contracts": list(rc.contracts), "meta": jsonable(r.meta or {}),
                         "flags": list(r.flags or []), "error": r.error or "",
                         "error_type": r.error_type or "", "seconds": float(r.seconds or 0.0)}
                if r.out is not None:
                    arr = np.ascontiguousarray(np.asarray(r.out))
                    name = f"out/{i:06d}.bin"
                    zf.writestr(name, arr.tobytes())
                    entry.update({"file": name, "dtype": arr.dtype.name, "shape": list(arr.shape)})
                entries.append(entry)
            manifest = dict(self.manifest)
            manifest["calls"] = entries
            zf.writestr("manifest.json", json.dumps(jsonable(manifest), indent=1))
        os.replace(tmp, path)
        self.path = path
        return path

    @classmethod
    def load(cls, path: str) -> "Recording":
        import ml_dtypes  # noqa: F401  (registers bfloat16 and the fp8 dtypes with numpy)
        try:
            zf = zipfile.ZipFile(path)
        except FileNotFoundError:
            raise UsageError(f"no such recording: {path}")
        except zipfile.BadZipFile:
            raise ReplayError(f"{path} is not a kcontract recording (not a zip archive)")
        with zf:
            try:
                manifest = json.loads(zf.read("manifest.json"))
            except KeyError:
                raise ReplayError(f"{path} is not a kcontract recording (no manifest.json)")
            if manifest.get("schema") != KCR_SCHEMA:
                raise ReplayError(f"{path}: unknown recording schema {manifest.get('schema')!r} "
                                  f"(expected {KCR_SCHEMA})")
            calls = []
            for e in manifest.pop("calls", []):
                out = None
                if e.get("file"):
                    data = zf.read(e["file"])
                    out = np.frombuffer(data, dtype=np.dtype(e["dtype"])).reshape(e["shape"]).copy()
                res = CallResult(status=e["status"], out=out, meta=dict(e.get("meta") or {}),
                                 flags=list(e.get("flags") or []), error=e.get("error", ""),
                                 error_type=e.get("error_type", ""),
                                 seconds=float(e.get("seconds") or 0.0))
                calls.append(RecordedCall(e["key"], int(e.get("n", 0)), res,
                                          list(e.get("contracts") or [])))
        return cls(manifest, calls, path)


def record(kernel: str, *, op: str, dtype: str, framework: str = "numpy", device: str = "cpu",
           classes: Optional[Sequence[str]] = None, declare: Optional[Mapping[str, Any]] = None,
           seed: int = 0, timeout: float = 60.0, contracts=None) -> Recording:
    """Run the protocol of ``kernel`` on this machine and keep every call's outcome."""
    from ..check.runner import check
    from ..check.sandbox import KernelLoadError, KernelProcess
    inner = KernelProcess(kernel, framework=framework, device=device, timeout=timeout)
    handle = RecordingHandle(inner)
    try:
        handle.start()
    except KernelLoadError as exc:
        raise UsageError(f"cannot record: {exc}")
    try:
        run = check(kernel, op=op, dtype=dtype, framework=framework, device=device,
                    classes=classes, declare=declare, seed=seed, contracts=contracts,
                    handle=handle, progress=handle.attribute)
    finally:
        handle.close()
    data = run.to_json()
    manifest = {
        "schema": KCR_SCHEMA, "kernel": kernel, "kernel_hash": data.get("kernel_hash", ""),
        "kernel_info": jsonable(dict(handle.info or {})), "op": op, "dtype": data["dtype"],
        "framework": framework, "device": device,
        "declare": {k: str(v) for k, v in (declare or {}).items()},
        "claims": data.get("claims"), "classes": list(classes) if classes else None,
        "seed": int(seed), "suite_version": data.get("suite_version"),
        "kcontract_version": __version__, "environment": data.get("environment"),
        "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "run": data,
    }
    return Recording(manifest, handle.calls)


def replay(recording: Recording, *, contracts=None, capture: Iterable[tuple] = ()):
    """Run the recorded protocol again, served from the recording; returns (run, handle)."""
    from ..check.runner import check
    m = recording.manifest
    handle = ReplayHandle(recording, capture)
    run = check(m["kernel"], op=m["op"], dtype=m["dtype"], framework=m.get("framework", "numpy"),
                device=m.get("device", "cpu"), classes=m.get("classes") or None,
                declare=m.get("declare") or {}, seed=int(m.get("seed", 0)), contracts=contracts,
                handle=handle, progress=handle.attribute)
    return run, handle


# -- comparing outcomes ------------------------------------------------------------------

def same_outcome(a: CallResult, b: CallResult) -> bool:
    """Bitwise: same status, and (when both returned) same dtype, shape and bytes."""
    if a.status != b.status:
        return False
    if a.status != "ok":
        return a.error_type == b.error_type
    if a.out is None or b.out is None:
        return a.out is None and b.out is None
    x, y = np.asarray(a.out), np.asarray(b.out)
    return (x.dtype == y.dtype and x.shape == y.shape
            and np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes())


def describe_outcome(r: CallResult) -> str:
    if r.status == "ok" and r.out is not None:
        return f"returned {tuple(np.shape(r.out))} {np.asarray(r.out).dtype.name}"
    if r.status == "raised":
        return f"raised {r.error_type}" + (f": {r.error[:120]}" if r.error else "")
    return r.describe()


def _as64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise |a - b| in float64; 0 where both are the same NaN/Inf, inf where
    exactly one side is NaN or the infinities differ."""
    x, y = _as64(a), _as64(b)
    with np.errstate(all="ignore"):
        d = np.abs(x - y)
    both_nan = np.isnan(x) & np.isnan(y)
    same_inf = np.isinf(x) & (x == y)
    d = np.where(both_nan | same_inf, 0.0, d)
    return np.where(np.isnan(d), np.inf, d)


def _bits(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x)
    if x.dtype.itemsize in (1, 2, 4, 8):
        return x.view(f"u{x.dtype.itemsize}")
    return x


def _first_difference(a: CallResult, b: CallResult, la: str = "A", lb: str = "B") -> str:
    if a.status != "ok" or b.status != "ok" or a.out is None or b.out is None:
        return f"{la} {describe_outcome(a)}; {lb} {describe_outcome(b)}"
    x, y = np.asarray(a.out), np.asarray(b.out)
    if x.shape != y.shape or x.dtype != y.dtype:
        return f"{la} {describe_outcome(a)}; {lb} {describe_outcome(b)}"
    d = distance(x, y)
    if not d.size:
        return "empty outputs"
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(d)), d.shape))
    differ = int(np.count_nonzero(_bits(x) != _bits(y)))
    return (f"{differ} of {d.size} elements differ; largest at {idx}: {la} {float(x[idx]):.9g}, "
            f"{lb} {float(y[idx]):.9g}")


# -- the bound between two conforming outputs -----------------------------------------------

def _tolerance(contract, manifest: Mapping[str, Any], args, kwargs, out) -> Optional[np.ndarray]:
    """The contract's elementwise tolerance for this call's output, judged with the
    recording's own claims; None when the contract has no elementwise tolerance or
    it needs protocol-specific quantities."""
    from ..check.engine import Context
    from ..language.claims import make_claims
    from ..formats import get_format
    from ..ops import get_op
    try:
        op = get_op(manifest["op"])
        if len(args) != len(op.inputs) or not contract.tolerance:
            return None
        fmt = get_format(manifest["dtype"])
        claims = make_claims(fmt, manifest.get("declare") or {})
        ctx = Context(contract, op, fmt, claims, None, framework=manifest.get("framework", "numpy"),
                      device=manifest.get("device", "cpu"), seed=int(manifest.get("seed", 0)))
        inputs = dict(zip(op.inputs, args))
        case = ctx.case(op.solve_shape(inputs), "recorded")
        kw = dict(ctx.kwargs())
        kw.update(kwargs or {})
        cmp = ctx.evaluate(case, inputs, out, kwargs=kw)
        if cmp.tol is None:
            return None
        return np.broadcast_to(np.asarray(cmp.tol, dtype=np.float64), np.shape(cmp.out))
    except Exception:
        return None


def _bound_statement(contract, ma, mb, args, kwargs, ra: CallResult, rb: CallResult):
    """(distance, bound, ratio, index) at the element nearest its bound, or None."""
    if ra.out is None or rb.out is None or np.shape(ra.out) != np.shape(rb.out):
        return None
    ta = _tolerance(contract, ma, args, kwargs, ra.out)
    tb = _tolerance(contract, mb, args, kwargs, rb.out)
    if ta is None or tb is None:
        return None
    d = distance(ra.out, rb.out)
    bound = ta + tb
    with np.errstate(all="ignore"):
        ratio = np.where(d == 0, 0.0, d / np.maximum(bound, 1e-300))
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    if not ratio.size:
        return None
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
    return float(d[idx]), float(bound[idx]), float(ratio[idx]), idx, float(np.max(d))


# -- arbitration ---------------------------------------------------------------------------

@dataclass
class Arbitration:
    data: dict

    @property
    def exit_code(self) -> int:
        """0: nobody violates a contract (the recordings agree, or differ within the
        bounds); 1: at least one side violates a contract."""
        return 1 if self.data.get("violators") else 0

    def to_json(self) -> dict:
        return self.data


def _side(label: str, rec: Recording) -> dict:
    m = rec.manifest
    env = m.get("environment") or {}
    return {"label": label, "file": rec.label, "kernel": m.get("kernel"),
            "kernel_hash": m.get("kernel_hash"), "framework": m.get("framework"),
            "device": m.get("device"), "device_name": env.get("device_name"),
            "machine": " / ".join(str(x) for x in (env.get("platform"), env.get("cpu")) if x),
            "claims": m.get("claims") or {}, "seed": m.get("seed"),
            "suite_version": m.get("suite_version"), "recorded_at": m.get("recorded_at")}


def _sig(r) -> str:
    if r is None:
        return ""
    code = (r.signature or {}).get("code") if r.signature else ""
    if not code and r.violation is not None:
        code = r.violation.code
    return str(code or "")


def arbitrate(a: Recording | str, b: Recording | str, *, contracts=None,
              labels: Sequence[str] = ("A", "B")) -> Arbitration:
    """Compare two recordings under this machine's oracle; see the module docstring."""
    ra = a if isinstance(a, Recording) else Recording.load(a)
    rb = b if isinstance(b, Recording) else Recording.load(b)
    la, lb = labels
    if la == lb:
        raise UsageError(f"the two sides need different labels, not both {la!r}")
    ma, mb = ra.manifest, rb.manifest
    for key in ("op", "dtype"):
        if ma.get(key) != mb.get(key):
            raise UsageError(f"cannot arbitrate recordings of different {key}s: "
                             f"{ma.get(key)} ({ra.label}) vs {mb.get(key)} ({rb.label})")
    notes = []
    if (ma.get("claims") or {}) != (mb.get("claims") or {}):
        diff = sorted(k for k in set(ma.get("claims") or {}) | set(mb.get("claims") or {})
                      if (ma.get("claims") or {}).get(k) != (mb.get("claims") or {}).get(k))
        notes.append("the two sides declared different claims (" + ", ".join(
            f"{k}: {la} {(ma.get('claims') or {}).get(k)}, {lb} {(mb.get('claims') or {}).get(k)}"
            for k in diff) + "); each side is judged by its own")
    for key in ("seed", "classes"):
        if ma.get(key) != mb.get(key):
            notes.append(f"the recordings differ in {key} ({ma.get(key)} vs {mb.get(key)}): only "
                         "calls made by both can be compared")
    if ma.get("suite_version") != mb.get("suite_version"):
        notes.append(f"recorded with suite versions {ma.get('suite_version')} and "
                     f"{mb.get('suite_version')}")

    # which calls differ, straight from the recordings
    by_a = {(c.key, c.occurrence): c for c in ra.calls}
    by_b = {(c.key, c.occurrence): c for c in rb.calls}
    common = [k for k in by_a if k in by_b]
    differing = [k for k in common if not same_outcome(by_a[k].result, by_b[k].result)]
    only_a = [k for k in by_a if k not in by_b]
    only_b = [k for k in by_b if k not in by_a]

    run_a, ha = replay(ra, contracts=contracts, capture=differing)
    run_b, hb = replay(rb, contracts=contracts, capture=())
    for label, rec, run in ((la, ra, run_a), (lb, rb, run_b)):
        recorded = {r["id"]: r["verdict"] for r in (rec.run.get("results") or [])}
        now = {r.id: r.verdict.value for r in run.results}
        changed = sorted(k for k in now if k in recorded and recorded[k] != now[k])
        if changed:
            what = ", ".join(f"{k}: {recorded[k]} there, {now[k]} here" for k in changed)
            notes.append(f"{label}: replayed here, the verdicts differ from the recording "
                         f"machine's ({what})")

    owner: dict[tuple, list] = {}
    for h in (ha, hb):
        for c in h.calls:
            owner.setdefault((c.key, c.occurrence), [])
            for cid in c.contracts:
                if cid not in owner[(c.key, c.occurrence)]:
                    owner[(c.key, c.occurrence)].append(cid)
    results_a = {r.id: r for r in run_a.results}
    results_b = {r.id: r for r in run_b.results}
    ids = list(dict.fromkeys([r.id for r in run_a.results] + [r.id for r in run_b.results]))
    contract_objs = _contract_objects(contracts, ids)

    rows, disagreements, violators = [], [], set()
    for cid in ids:
        A, B = results_a.get(cid), results_b.get(cid)
        cls = (A or B).contract
        va = A.verdict.value if A else "absent"
        vb = B.verdict.value if B else "absent"
        mine = [k for k in differing if cid in owner.get(k, [])]
        only = [k for k in only_a + only_b if cid in owner.get(k, [])]
        row = {"contract": cls, "id": cid, "a_verdict": va, "b_verdict": vb,
               "a_signature": _sig(A), "b_signature": _sig(B), "differing_calls": len(mine),
               "unmatched_calls": len(only), "at_fault": []}
        for label, R, v in ((la, A, va), (lb, B, vb)):
            if v in BAD:
                row["at_fault"].append(label)
                violators.add(label)
        finding, statement, dist = _finding(cls, cid, (la, A, va), (lb, B, vb), mine, only,
                                            contract_objs.get(cid), ma, mb, by_a, by_b,
                                            ha.captured)
        row["finding"] = finding
        if dist is not None:
            row.update({"distance": dist[0], "bound": dist[1], "ratio": dist[2]})
        rows.append(row)
        if statement:
            example = ""
            if mine:
                example = _first_difference(by_a[mine[0]].result, by_b[mine[0]].result, la, lb)
                args = ha.captured.get(mine[0])
                if args is not None:
                    example = f"inputs {_describe_args(ma['op'], args[0])}: {example}"
            disagreements.append({"contract": cls, "id": cid, "statement": statement,
                                  "finding": finding, "at_fault": row["at_fault"],
                                  "calls": len(mine), "example": example,
                                  "a_signature": row["a_signature"],
                                  "b_signature": row["b_signature"],
                                  **({"distance": dist[0], "bound": dist[1]} if dist else {})})
    unowned = [k for k in differing if not owner.get(k)]
    if unowned:
        notes.append(f"{len(unowned)} differing call(s) could not be attributed to a contract")
    data = {"schema": ARBITRATION_SCHEMA, "op": ma.get("op"), "dtype": ma.get("dtype"),
            "a": _side(la, ra), "b": _side(lb, rb), "calls": len(common),
            "differing_calls": len(differing), "only_in_a": len(only_a), "only_in_b": len(only_b),
            "agree": not differing and not only_a and not only_b
            and all(r["a_verdict"] == r["b_verdict"] for r in rows),
            "violators": sorted(violators), "contracts": rows, "disagreements": disagreements,
            "causes": compare_causes(run_a, run_b, la, lb),
            "notes": notes, "arbitrated_with": {"kcontract": __version__}}
    return Arbitration(jsonable(data))


def compare_causes(run_a, run_b, la: str, lb: str) -> dict:
    """Each side's primary causes (the run-level diagnosis of its replayed run) and what
    they say together: the same causes, different ones, or one side's alone."""
    da, db = run_a.diagnosed(), run_b.diagnosed()
    ca = [c.to_json() for c in da.primary]
    cb = [c.to_json() for c in db.primary]
    ka, kb = {c["class"] for c in ca}, {c["class"] for c in cb}

    def said(label, cs):
        return "; ".join(f"{c['class']} ({', '.join(c['contracts'])}): {c['cause']}" for c in cs) \
            or "no cause (conforms)"
    if ka == kb:
        statement = ("neither side has a cause of failure" if not ka else
                     f"both sides fail for the same cause{'s' if len(ka) > 1 else ''} "
                     f"({', '.join(sorted(ka))}): {la}: {said(la, ca)}; {lb}: {said(lb, cb)}")
    else:
        statement = f"{la}: {said(la, ca)}; {lb}: {said(lb, cb)}"
    return {la: ca, lb: cb, "same": ka == kb, "statement": statement}


def _finding(cls, cid, side_a, side_b, mine, only, contract, ma, mb, by_a, by_b, captured):
    """(short finding, full statement or None when there is nothing to settle, bound)."""
    (la, _, va), (lb, _, vb) = side_a, side_b
    faults = [(label, R, v) for label, R, v in (side_a, side_b) if v in BAD]
    if faults:
        short, long = [], []
        for label, R, v in faults:
            verb = "violates" if v == "violation" else "fails with an error on"
            short.append(f"{label} {verb} {cls} ({_sig(R) or v})")
            long.append(f"{label} {verb} {cls} {cid} [{_sig(R) or v}]: {R.message}")
        others = [(label, v) for label, R, v in (side_a, side_b) if v not in BAD]
        tail = "".join(f"; {label} {'conforms' if v == 'pass' else v}" for label, v in others)
        return "; ".join(short) + tail, "; ".join(long) + tail, None
    if mine and va == vb == "pass":
        dist = _worst_bound(contract, ma, mb, mine, by_a, by_b, captured)
        if dist is None:
            text = (f"both conform to {cls} and still differ on {len(mine)} call(s); the contract "
                    "sets no elementwise bound between them, so it allows both outcomes")
            return text, f"{cls} {cid}: {text}", None
        d, bnd, ratio, idx, dmax, where = dist
        short = f"both conform; distance {d:.3g} vs allowed bound {bnd:.3g}"
        long = (f"both conform to {cls} {cid} and still differ on {len(mine)} call(s): distance "
                f"{d:.3g} vs allowed bound {bnd:.3g} at element {idx}{where} ({ratio:.2g} of the "
                f"bound; |{la} − {lb}| ≤ tol({la}) + tol({lb}), each side being within its "
                f"tolerance of the float64 oracle)")
        if dmax > d:
            long += f"; the largest absolute distance, {dmax:.3g}, lies where the bound is wider"
        return short, long, dist
    if mine:
        text = f"both {va} yet differ on {len(mine)} call(s)"
        return text, f"{cls} {cid}: {text}", None
    if va != vb:
        text = f"{la} {va}, {lb} {vb}"
        return text, f"{cls} {cid}: {text}", None
    if only:
        return f"agree on the calls both made ({len(only)} made by one side only)", None, None
    return "agree bitwise", None, None


def _describe_args(op_name: str, args) -> str:
    try:
        from ..ops import get_op
        op = get_op(op_name)
        shape = op.solve_shape(dict(zip(op.inputs, args)))
        return ",".join(f"{k}={v}" for k, v in shape.items())
    except Exception:
        return " ".join(str(tuple(np.shape(a))) for a in args)


def _worst_bound(contract, ma, mb, keys, by_a, by_b, captured):
    if contract is None:
        return None
    best = best_key = None
    dmax = 0.0
    for k in keys:
        args = captured.get(k)
        if args is None:
            continue
        got = _bound_statement(contract, ma, mb, args[0], args[1], by_a[k].result, by_b[k].result)
        if got is None:
            return None
        dmax = max(dmax, got[4])
        if best is None or got[2] > best[2]:
            best, best_key = got, k
    if best is None:
        return None
    args = captured.get(best_key)
    where = f" of the {_describe_args(ma['op'], args[0])} case" if args is not None else ""
    return best[0], best[1], best[2], best[3], dmax, where


def _contract_objects(contracts, ids) -> dict:
    if contracts is None:
        from ..suite import load_suite
        contracts = load_suite()
    return {c.id: c for c in contracts if c.id in ids}


__all__ = ["KCR_SCHEMA", "ARBITRATION_SCHEMA", "Recording", "RecordedCall", "RecordingHandle",
           "ReplayHandle", "ReplayError", "Arbitration", "call_key", "record", "replay",
           "arbitrate", "same_outcome"]
