"""The results store: runs recorded with their environment and verdicts; history
shows when a verdict changed; two processes writing at once lose nothing."""
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kcontract.records import store
from kcontract.records.store import StoreError, history, load_run, record_run


def make_run(kernel="k.py:mm", op="matmul", verdicts=("pass", "pass"), khash="a" * 64,
             suite="0.1.0"):
    results = []
    for i, v in enumerate(verdicts):
        r = {"contract": f"C-PRC-0{i + 1}", "id": f"prc0{i + 1}-{op}", "verdict": v,
             "signature": {"code": f"C-PRC-0{i + 1}.sig"} if v == "violation" else None,
             "message": "m", "cases": 3}
        if v == "violation":
            r["violation"] = {"measured": 2.0, "allowed": 1.0, "code": f"C-PRC-0{i + 1}.sig"}
        results.append(r)
    verdict = "error" if "error" in verdicts else "violation" if "violation" in verdicts else "conformant"
    return {"schema": "kcontract.run/1", "kernel": kernel, "kernel_hash": khash, "op": op,
            "dtype": "float32", "framework": "torch", "device": "cuda:0",
            "claims": {"accumulate": "float32"},
            "environment": {"device_name": "NVIDIA H100", "driver": "550.54", "cuda_runtime": "12.4",
                            "torch": "2.3.0", "numpy": "2.0", "python": "3.11",
                            "cpu_flags": ["avx2", "fma"], "cpu": "Xeon"},
            "suite_version": suite, "seconds": 1.5, "verdict": verdict, "results": results}


def test_a_run_is_recorded_with_its_environment_and_verdicts(tmp_path):
    db = tmp_path / "deep" / "er" / "results.db"  # folders created on first use
    run_id = record_run(make_run(verdicts=("pass", "violation")), str(db))
    assert run_id == 1 and db.exists()
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    row = con.execute("SELECT * FROM runs").fetchone()
    assert row["kernel"] == "k.py:mm" and row["kernel_module"] == "k.py"
    assert row["kernel_hash"] == "a" * 64 and row["suite_version"] == "0.1.0"
    assert (row["device"], row["device_name"], row["driver"], row["runtime"]) == (
        "cuda:0", "NVIDIA H100", "550.54", "12.4")
    assert row["framework_version"] == "2.3.0"
    assert json.loads(row["libraries"])["numpy"] == "2.0"
    assert json.loads(row["cpu_flags"]) == ["avx2", "fma"]
    assert (row["verdict"], row["n_pass"], row["n_violation"]) == ("violation", 1, 1)
    verdicts = con.execute("SELECT contract, contract_id, verdict, signature, measured, allowed "
                           "FROM verdicts ORDER BY contract").fetchall()
    assert [tuple(v) for v in verdicts] == [("C-PRC-01", "prc01-matmul", "pass", None, None, None),
                                           ("C-PRC-02", "prc02-matmul", "violation",
                                            "C-PRC-02.sig", 2.0, 1.0)]
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert load_run(run_id, str(db)) == make_run(verdicts=("pass", "violation"))


def test_history_shows_when_a_verdict_changed(tmp_path):
    db = str(tmp_path / "r.db")
    record_run(make_run(), db)
    record_run(make_run(kernel="other.py:mm"), db)
    record_run(make_run(verdicts=("pass", "violation"), khash="b" * 64), db)
    record_run(make_run(verdicts=("pass", "violation"), khash="b" * 64), db)
    record_run(make_run(suite="0.2.0"), db)
    entries = history(db, kernel="k.py:mm")
    assert [e.id for e in entries] == [1, 3, 4, 5]
    assert entries[0].changes == [] and entries[2].changes == []
    assert entries[1].changes == ["verdict conformant → violation",
                                  "C-PRC-02 prc02-matmul: pass → violation",
                                  "kernel source aaaaaaaaaa → bbbbbbbbbb"]
    assert entries[1].verdict_changed and not entries[2].verdict_changed
    assert entries[3].changes[:2] == ["verdict violation → conformant",
                                      "C-PRC-02 prc02-matmul: violation → pass"]
    assert "suite 0.1.0 → 0.2.0" in entries[3].changes
    assert [e.id for e in history(db, kernel="other")] == [2]  # a part of the spec
    assert [e.id for e in history(db, kernel="bbbb")] == [3, 4]  # a source-hash prefix
    assert history(db, op="sum") == []
    assert history(str(tmp_path / "none.db")) == []  # no store yet: nothing, and none created
    assert not (tmp_path / "none.db").exists()


def test_cli_history(run_cli, tmp_path):
    db = tmp_path / "r.db"
    record_run(make_run(), str(db))
    record_run(make_run(verdicts=("violation", "pass")), str(db))
    code, out, _ = run_cli("history", "--store", db, "--kernel", "k.py:mm")
    assert code == 0
    flat = " ".join(out.split())
    assert ("k.py:mm: verdict conformant → violation; C-PRC-01 prc01-matmul: pass → violation"
            in flat)
    assert "verdict changed in 1 run(s) (marked *): #2" in out
    code, out, _ = run_cli("history", "--store", db, "--changes", "--json")
    data = json.loads(out)
    assert [d["id"] for d in data] == [2] and data[0]["changes"][0] == "verdict conformant → violation"
    code, out, _ = run_cli("history", "--store", tmp_path / "empty.db")
    assert code == 0 and "no runs recorded" in out


def test_default_store_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KCONTRACT_STORE", str(tmp_path / "env.db"))
    assert store.default_store_path() == str(tmp_path / "env.db")
    record_run(make_run())
    assert (tmp_path / "env.db").exists()
    monkeypatch.delenv("KCONTRACT_STORE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert store.default_store_path() == str(tmp_path / "home" / ".kcontract" / "results.db")


def test_an_unwritable_store_raises_store_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError):
        record_run(make_run(), str(blocker / "results.db"))  # a file where a folder should be
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError):
        record_run(make_run(), str(garbage))
    with pytest.raises(StoreError):
        record_run({"not": "a run"}, str(tmp_path / "ok.db"))


def test_check_warns_but_passes_when_the_store_is_unwritable(run_cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    example = Path(__file__).parents[1] / "examples" / "user_contract" / "acme_matmul.contract.yaml"
    code, out, err = run_cli("check", example, "--store", blocker / "r.db", "-q")
    assert code == 0
    assert "warning: run not recorded in the results store" in err


WRITER = """
import os, sys, time
from kcontract.records.store import record_run
sys.path.insert(0, {tests!r})
from test_store import make_run
db, go, who, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
while not os.path.exists(go):
    time.sleep(0.005)
for i in range(n):
    record_run(make_run(kernel=f"{{who}}.py:k{{i}}", verdicts=("pass", "violation", "pass")), db)
"""


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    db, go = tmp_path / "shared.db", tmp_path / "go"
    n = 40
    script = WRITER.format(tests=str(Path(__file__).parent))
    procs = [subprocess.Popen([sys.executable, "-c", script, str(db), str(go), who, str(n)],
                              stderr=subprocess.PIPE, text=True) for who in ("p", "q")]
    time.sleep(0.5)  # both interpreters up and polling
    go.write_text("go")
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 2 * n
    assert con.execute("SELECT count(*) FROM verdicts").fetchone()[0] == 2 * n * 3
    kernels = {r[0] for r in con.execute("SELECT kernel FROM runs")}
    assert kernels == {f"{w}.py:k{i}" for w in "pq" for i in range(n)}
    assert len(history(str(db))) == 2 * n


def test_check_records_every_run_by_default(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("KCONTRACT_STORE", str(tmp_path / "default.db"))
    example = Path(__file__).parents[1] / "examples" / "user_contract" / "acme_matmul.contract.yaml"
    assert run_cli("check", example, "-q")[0] == 0
    (e,) = history()
    assert e.kernel.endswith("acme_kernels.py:matmul_bf16") and e.verdict == "conformant"
    assert e.kernel_hash and os.path.exists(tmp_path / "default.db")


def test_cli_report_renders_a_stored_run(run_cli, tmp_path):
    db = tmp_path / "r.db"
    run_id = record_run(make_run(verdicts=("violation", "pass")), str(db))
    md = tmp_path / "r.md"
    code, _, err = run_cli("report", "--id", run_id, "--store", db, "--markdown", md)
    assert code == 0 and f"wrote {md}" in err
    assert "k.py:mm" in md.read_text() and "violation" in md.read_text()
    assert run_cli("report", "--id", 999, "--store", db)[0] == 2


def test_stored_runs_are_signed_and_a_rewrite_is_detected(tmp_path):
    """A run's JSON is signed with the checker's key; rewriting it in the database (what a
    process without the key can do) fails verification."""
    import sqlite3
    import zlib

    from kcontract.records.store import load_run, record_run, verify_run
    db = tmp_path / "r.db"
    run = {"schema": "kcontract.run/1", "kernel": "k.py:f", "op": "matmul", "dtype": "float32",
           "results": [{"contract": "C-PRC-01", "id": "x", "verdict": "violation"}]}
    rid = record_run(run, str(db))
    ok, why = verify_run(rid, str(db))
    assert ok, why
    forged = dict(load_run(rid, str(db)))
    forged["results"] = [{"contract": "C-PRC-01", "id": "x", "verdict": "pass"}]
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET run_json = ?, verdict = 'conformant' WHERE id = ?",
                     (zlib.compress(json.dumps(forged).encode()), rid))
    ok, why = verify_run(rid, str(db))
    assert not ok and "does not match" in why
