"""The results store: every run, recorded in an embedded SQLite database.

Where: ``--store PATH``, else ``$KCONTRACT_STORE``, else ``~/.kcontract/results.db``
(the folder is created on first use).  What: one row per run with the
environment tuple (device and its name, driver and runtime versions, framework
and library versions, CPU flags), the suite version, the kernel's identity (its
spec, module path and source hash), the claims and the overall verdict; one
row per contract verdict; and the run's full JSON (compressed), so any stored
run can be rendered again, with an Ed25519 signature of that JSON by this
machine's key (:mod:`kcontract.records.signing`; :func:`verify_run` checks it).

Concurrent writers lose nothing: the database runs in WAL mode, every
connection waits on a busy database (``busy_timeout``), every write is one
``BEGIN IMMEDIATE`` transaction, and a write that still finds the database
locked is retried with backoff.  A store that cannot be written raises
:class:`StoreError`; callers warn and carry on (a run never fails because of
its bookkeeping).
"""
from __future__ import annotations

import json
import os
import random
import sqlite3
import time
import zlib
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Optional

from ..errors import KContractError
from .signing import signer, verify as verify_signature
from ..report._util import counts as verdict_counts, overall, signature_code

SCHEMA_VERSION = 1
ENV_VAR = "KCONTRACT_STORE"
BUSY_TIMEOUT_S = 30.0
RETRY_FOR_S = 120.0

#: environment keys lifted into their own columns (the rest stays in the JSON)
_LIBRARIES = ("numpy", "ml_dtypes", "torch", "jax", "triton", "cudnn", "cuda_runtime", "rocm",
              "python", "kcontract")

DDL = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    recorded_at       TEXT NOT NULL,      -- UTC, ISO 8601
    kernel            TEXT NOT NULL,      -- the kernel spec: path/file.py:fn or module:fn
    kernel_module     TEXT,               -- its module path (the spec before the colon)
    kernel_hash       TEXT,               -- sha256 of the kernel's source file
    op                TEXT,
    dtype             TEXT,
    framework         TEXT,
    device            TEXT,
    device_name       TEXT,
    driver            TEXT,
    runtime           TEXT,               -- e.g. CUDA runtime version
    framework_version TEXT,
    libraries         TEXT,               -- JSON {name: version}
    cpu               TEXT,
    cpu_flags         TEXT,               -- JSON list
    environment       TEXT,               -- JSON, everything the adapter captured
    suite_version     TEXT,
    claims            TEXT,               -- JSON
    verdict           TEXT NOT NULL,      -- conformant | violation | error
    n_pass            INTEGER NOT NULL DEFAULT 0,
    n_violation       INTEGER NOT NULL DEFAULT 0,
    n_error           INTEGER NOT NULL DEFAULT 0,
    n_skipped         INTEGER NOT NULL DEFAULT 0,
    seconds           REAL,
    run_json          BLOB,               -- zlib-compressed kcontract.run/1 JSON
    signature         TEXT                -- JSON: Ed25519 signature of the uncompressed run_json
);
CREATE TABLE IF NOT EXISTS verdicts (
    run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    contract    TEXT NOT NULL,            -- class ID, e.g. C-PRC-01
    contract_id TEXT NOT NULL,
    verdict     TEXT NOT NULL,            -- pass | violation | error | skipped
    signature   TEXT,                     -- signature code
    message     TEXT,
    measured    REAL,
    allowed     REAL,
    PRIMARY KEY (run_id, contract_id)
);
CREATE INDEX IF NOT EXISTS runs_by_kernel ON runs (kernel, op, recorded_at);
CREATE INDEX IF NOT EXISTS runs_by_op ON runs (op, recorded_at);
"""


class StoreError(KContractError):
    """The results store could not be opened, written or read."""


def default_store_path() -> str:
    """``$KCONTRACT_STORE`` if set, else ``~/.kcontract/results.db``."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return os.path.expanduser(env)
    return os.path.join(os.path.expanduser("~"), ".kcontract", "results.db")


def resolve(store: Optional[str]) -> str:
    return os.path.expanduser(store) if store else default_store_path()


# -- connections ---------------------------------------------------------------------

def _is_busy(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


def _retrying(fn, *, what: str, path: str):
    """Run ``fn()``; retry with jittered backoff while the database is busy."""
    deadline = time.monotonic() + RETRY_FOR_S
    delay = 0.02
    while True:
        try:
            return fn()
        except sqlite3.Error as exc:
            if _is_busy(exc) and time.monotonic() < deadline:
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 1.0)
                continue
            raise StoreError(f"cannot {what} the results store {path}: {exc}") from exc


def _connect(path: str, *, create: bool) -> sqlite3.Connection:
    if create:
        folder = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the results store folder {folder}: {exc}") from exc
    elif not os.path.exists(path):
        raise StoreError(f"no results store at {path}")

    def open_it():
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            if create:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
                if mode and str(mode[0]).lower() != "wal":  # e.g. a filesystem without shm
                    conn.execute("PRAGMA journal_mode = DELETE")
                conn.execute("PRAGMA synchronous = NORMAL")
                _ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        return conn
    return _retrying(open_it, what="open", path=path)


def _ensure_schema(conn: sqlite3.Connection) -> None:
    have = conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
    if have:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row and int(row[0]) > SCHEMA_VERSION:
            raise StoreError(f"the results store has schema version {row[0]}, newer than this "
                             f"kcontract understands ({SCHEMA_VERSION}); upgrade kcontract")
        if row:
            cols = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
            if "signature" not in cols:  # a store written before runs were signed
                try:
                    conn.execute("ALTER TABLE runs ADD COLUMN signature TEXT")
                except sqlite3.OperationalError as exc:
                    if "duplicate column" not in str(exc).lower():
                        raise
            return
    conn.execute("BEGIN IMMEDIATE")
    try:
        for stmt in DDL.split(";"):
            if stmt.strip():
                conn.execute(stmt)
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                     (str(SCHEMA_VERSION),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


# -- writing -------------------------------------------------------------------------

def _num(x: Any) -> Optional[float]:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if f == f and abs(f) != float("inf") else None


def _row_for(run: Mapping[str, Any], recorded_at: str) -> dict:
    env = dict(run.get("environment") or {})
    raw = json.dumps(run, default=str).encode()
    counts = verdict_counts(run)
    verdict = overall(run)
    kernel = str(run.get("kernel") or "")
    framework = str(run.get("framework") or env.get("framework") or "")
    libraries = {k: env[k] for k in _LIBRARIES if env.get(k) not in (None, "")}
    return {
        "recorded_at": recorded_at, "kernel": kernel,
        "kernel_module": kernel.rpartition(":")[0] or kernel,
        "kernel_hash": run.get("kernel_hash") or "", "op": run.get("op"),
        "dtype": run.get("dtype"), "framework": framework, "device": run.get("device"),
        "device_name": env.get("device_name") or env.get("cpu"),
        "driver": _text(env.get("driver")),
        "runtime": _text(env.get("cuda_runtime") or env.get("hip_runtime") or env.get("runtime")),
        "framework_version": _text(env.get(framework)),
        "libraries": json.dumps(libraries, sort_keys=True),
        "cpu": env.get("cpu"), "cpu_flags": json.dumps(env.get("cpu_flags") or []),
        "environment": json.dumps(env, sort_keys=True, default=str),
        "suite_version": run.get("suite_version"),
        "claims": json.dumps(run.get("claims") or {}, sort_keys=True, default=str),
        "verdict": verdict, "n_pass": counts["pass"], "n_violation": counts["violation"],
        "n_error": counts["error"], "n_skipped": counts["skipped"],
        "seconds": _num(run.get("seconds")),
        "run_json": zlib.compress(raw, 6),
        "signature": json.dumps(signer().sign(raw)),
    }


def _text(x: Any) -> Optional[str]:
    return None if x is None else str(x)


def record_run(run_json: Mapping[str, Any], store: Optional[str] = None) -> int:
    """Record one run (``RunResult.to_json()``); returns its id in the store."""
    path = resolve(store)
    if not isinstance(run_json, Mapping) or "results" not in run_json:
        raise StoreError("not a kcontract run (expected RunResult.to_json())")
    row = _row_for(run_json, datetime.now(timezone.utc).isoformat(timespec="microseconds"))
    verdict_rows = []
    for r in run_json.get("results") or []:
        v = r.get("violation") or {}
        verdict_rows.append((str(r.get("contract", "")), str(r.get("id", "")),
                             str(r.get("verdict", "error")), signature_code(r) or None,
                             r.get("message"), _num(v.get("measured")), _num(v.get("allowed"))))
    cols = ", ".join(row)
    marks = ", ".join("?" for _ in row)

    with closing(_connect(path, create=True)) as conn:
        def write():
            conn.execute("BEGIN IMMEDIATE")
            try:
                cur = conn.execute(f"INSERT INTO runs ({cols}) VALUES ({marks})", tuple(row.values()))
                run_id = int(cur.lastrowid)
                conn.executemany("INSERT OR REPLACE INTO verdicts (run_id, contract, contract_id, "
                                 "verdict, signature, message, measured, allowed) VALUES "
                                 "(?, ?, ?, ?, ?, ?, ?, ?)",
                                 [(run_id,) + vr for vr in verdict_rows])
                conn.execute("COMMIT")
            except BaseException:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
                raise
            return run_id
        return _retrying(write, what="write to", path=path)


# -- reading -------------------------------------------------------------------------

@dataclass
class HistoryEntry:
    """One stored run, with what changed since the previous run of the same series
    (same kernel, op, dtype, framework and device)."""

    id: int
    recorded_at: str
    kernel: str
    kernel_hash: str
    op: str
    dtype: str
    framework: str
    device: str
    device_name: str
    suite_version: str
    verdict: str
    counts: dict
    verdicts: dict = field(default_factory=dict)  # contract id -> (class, verdict, signature)
    changes: list = field(default_factory=list)  # human-readable, empty for the first run

    @property
    def series(self) -> tuple:
        return (self.kernel, self.op, self.dtype, self.framework, self.device)

    @property
    def verdict_changed(self) -> bool:
        return any(c.startswith(("verdict ", "C-")) for c in self.changes)

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["verdicts"] = {k: list(v) for k, v in self.verdicts.items()}
        return d


def _rows(conn, kernel: Optional[str], op: Optional[str]) -> Iterator[sqlite3.Row]:
    sql = ("SELECT id, recorded_at, kernel, kernel_hash, op, dtype, framework, device, "
           "device_name, suite_version, verdict, n_pass, n_violation, n_error, n_skipped "
           "FROM runs")
    where, args = [], []
    if kernel:
        where.append("(kernel = ? OR instr(kernel, ?) > 0 OR kernel_hash LIKE ?)")
        args += [kernel, kernel, kernel + "%"]
    if op:
        where.append("op = ?")
        args.append(op)
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY recorded_at, id"
    return conn.execute(sql, args)


def history(store: Optional[str] = None, kernel: Optional[str] = None,
            op: Optional[str] = None) -> list[HistoryEntry]:
    """Stored runs, oldest first, optionally only those of a kernel (its spec, a part
    of it such as the file name, or a prefix of its source hash) and/or an op.  Each
    entry lists what changed since the previous run of its series: the overall
    verdict, each contract's verdict, the kernel's source, the suite version."""
    path = resolve(store)
    if not os.path.exists(path):
        return []
    with closing(_connect(path, create=False)) as conn:
        def read():
            conn.row_factory = sqlite3.Row
            entries = []
            for row in _rows(conn, kernel, op):
                entries.append(HistoryEntry(
                    id=row["id"], recorded_at=row["recorded_at"], kernel=row["kernel"],
                    kernel_hash=row["kernel_hash"] or "", op=row["op"] or "",
                    dtype=row["dtype"] or "", framework=row["framework"] or "",
                    device=row["device"] or "", device_name=row["device_name"] or "",
                    suite_version=row["suite_version"] or "", verdict=row["verdict"],
                    counts={"pass": row["n_pass"], "violation": row["n_violation"],
                            "error": row["n_error"], "skipped": row["n_skipped"]}))
            if entries:
                ids = [e.id for e in entries]
                by_id = {e.id: e for e in entries}
                for chunk in range(0, len(ids), 500):
                    part = ids[chunk:chunk + 500]
                    q = ("SELECT run_id, contract, contract_id, verdict, signature FROM verdicts "
                         f"WHERE run_id IN ({','.join('?' for _ in part)})")
                    for run_id, cls, cid, verdict, sig in conn.execute(q, part):
                        by_id[run_id].verdicts[cid] = (cls, verdict, sig or "")
            return entries
        entries = _retrying(read, what="read", path=path)
    _mark_changes(entries)
    return entries


def _mark_changes(entries: list[HistoryEntry]) -> None:
    last: dict[tuple, HistoryEntry] = {}
    for e in entries:
        prev = last.get(e.series)
        last[e.series] = e
        if prev is None:
            continue
        if prev.verdict != e.verdict:
            e.changes.append(f"verdict {prev.verdict} → {e.verdict}")
        for cid in sorted(set(prev.verdicts) | set(e.verdicts)):
            a, b = prev.verdicts.get(cid), e.verdicts.get(cid)
            va, vb = (a[1] if a else "absent"), (b[1] if b else "absent")
            if va != vb:
                cls = (b or a)[0]
                e.changes.append(f"{cls} {cid}: {va} → {vb}")
        if prev.kernel_hash != e.kernel_hash:
            e.changes.append(f"kernel source {prev.kernel_hash[:10] or '?'} → "
                             f"{e.kernel_hash[:10] or '?'}")
        if prev.suite_version != e.suite_version:
            e.changes.append(f"suite {prev.suite_version} → {e.suite_version}")
        if prev.device_name != e.device_name:
            e.changes.append(f"device {prev.device_name} → {e.device_name}")


def verify_run(run_id: int, store: Optional[str] = None) -> tuple:
    """(ok, message): whether the stored run's JSON carries a valid signature by a key
    trusted here (a run rewritten by anyone without the key, a kernel included, fails)."""
    blob, signature = _stored(run_id, store, "run_json, signature")
    try:
        sig = json.loads(signature) if signature else None
    except ValueError:
        sig = None
    return verify_signature(zlib.decompress(blob), sig)


def load_run(run_id: int, store: Optional[str] = None) -> dict:
    """The full JSON of a stored run."""
    blob, = _stored(run_id, store, "run_json")
    return json.loads(zlib.decompress(blob).decode())


def _stored(run_id: int, store: Optional[str], columns: str) -> tuple:
    """The ``columns`` (run_json first) of stored run ``run_id``; StoreError if it is not
    there."""
    path = resolve(store)
    with closing(_connect(path, create=False)) as conn:
        row = _retrying(lambda: conn.execute(f"SELECT {columns} FROM runs WHERE id = ?",
                                             (int(run_id),)).fetchone(), what="read", path=path)
    if row is None or row[0] is None:
        raise StoreError(f"no run {run_id} in the results store {path}")
    return tuple(row)


__all__ = ["StoreError", "HistoryEntry", "default_store_path", "record_run", "history",
           "load_run", "verify_run", "SCHEMA_VERSION", "ENV_VAR"]
