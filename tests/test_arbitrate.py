"""Recording and arbitration: the dispute example (examples/dispute) names the
right side and contract for each disagreement; both-conform differences come
with their distance against the bound; the .kcr format round-trips."""
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from kcontract.records.arbitrate import (Recording, RecordedCall, ReplayError, ReplayHandle, arbitrate,
                                 call_key, record, replay)
from kcontract.check.sandbox import CallResult
from kcontract.errors import UsageError

DISPUTE = Path(__file__).parents[1] / "examples" / "dispute"
#: op -> the contract class each dispute is about (as in examples/dispute/dispute.sh)
DISPUTES = {"matmul": "C-PRC-01", "embedding": "C-EXC-02", "sum": "C-PRC-01"}


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """Each op recorded on both stacks and saved as .kcr (so every test loads files)."""
    d = tmp_path_factory.mktemp("kcr")
    out = {}
    for op, cls in DISPUTES.items():
        for side in ("a", "b"):
            rec = record(f"{DISPUTE / f'stack_{side}.py'}:{op}", op=op, dtype="float32",
                         classes=[cls])
            out[(op, side)] = rec.save(str(d / f"{side}-{op}.kcr"))
    return out


def _arbitrate(recordings, op):
    return arbitrate(recordings[(op, "a")], recordings[(op, "b")]).to_json()


def test_matmul_dispute_blames_stack_b_for_precision(recordings):
    arb = _arbitrate(recordings, "matmul")
    assert arb["violators"] == ["B"]
    (row,) = [r for r in arb["contracts"] if r["contract"] == "C-PRC-01"]
    assert (row["a_verdict"], row["b_verdict"]) == ("pass", "violation")
    assert row["at_fault"] == ["B"] and row["differing_calls"] > 0
    (d,) = [d for d in arb["disagreements"] if d["contract"] == "C-PRC-01"]
    assert d["at_fault"] == ["B"]
    assert d["statement"].startswith("B violates C-PRC-01 ")
    assert f"[{row['b_signature']}]" in d["statement"] and row["b_signature"].startswith("C-PRC-01.")
    assert "fp16" in d["statement"]  # the fingerprint: operands rounded to fp16
    assert "differ" in d["example"]


def test_embedding_dispute_blames_stack_a_for_clamping(recordings):
    arb = _arbitrate(recordings, "embedding")
    assert arb["violators"] == ["A"]
    rows = [r for r in arb["contracts"] if r["contract"] == "C-EXC-02"]
    assert rows and all(r["at_fault"] == ["A"] for r in rows if r["differing_calls"])
    d = next(d for d in arb["disagreements"] if d["contract"] == "C-EXC-02")
    assert d["statement"].startswith("A violates C-EXC-02 ") and d["a_signature"]
    assert "B raised IndexError" in d["example"]


def test_sum_both_conform_and_differ_within_the_bound(recordings):
    arb = _arbitrate(recordings, "sum")
    assert arb["violators"] == [] and not arb["agree"]
    (d,) = arb["disagreements"]
    assert d["at_fault"] == [] and d["statement"].startswith("both conform to C-PRC-01")
    assert 0 < d["distance"] < d["bound"]
    assert f"distance {d['distance']:.3g} vs allowed bound {d['bound']:.3g}" in d["statement"]


def test_a_recording_arbitrated_against_itself_agrees(recordings):
    arb = arbitrate(recordings[("sum", "a")], recordings[("sum", "a")]).to_json()
    assert arb["agree"] and arb["differing_calls"] == 0 and not arb["disagreements"]
    assert all(r["finding"] == "agree bitwise" for r in arb["contracts"])


def test_replay_reproduces_the_recorded_verdicts(recordings):
    for path in recordings.values():
        rec = Recording.load(path)
        run, handle = replay(rec)
        assert [(r.id, r.verdict.value) for r in run.results] == \
            [(r["id"], r["verdict"]) for r in rec.run["results"]]
        assert len(handle.calls) == len(rec.calls)
        assert rec.manifest["kernel_hash"] and rec.manifest["environment"]["cpu"]


def test_cli_record_and_arbitrate(run_cli, tmp_path):
    for side in ("a", "b"):
        code, out, err = run_cli("record", f"{DISPUTE / f'stack_{side}.py'}:matmul", "--op",
                                 "matmul", "--dtype", "float32", "--contract", "C-PRC-01",
                                 "--out", tmp_path / f"{side}.kcr")
        assert code == 0, out + err
        assert "calls recorded in" in out
    code, out, _ = run_cli("arbitrate", tmp_path / "a.kcr", tmp_path / "b.kcr", "--json",
                           tmp_path / "arb.json", "--report", tmp_path / "arb.html",
                           "--label", "stack A", "--label", "stack B")
    assert code == 1  # a side is at fault
    assert "at fault: stack B" in out
    data = json.loads((tmp_path / "arb.json").read_text())
    assert data["violators"] == ["stack B"]
    html = (tmp_path / "arb.html").read_text()
    assert "stack B violates C-PRC-01" in html and 'data-verdict="disagree"' in html
    code, out, _ = run_cli("arbitrate", tmp_path / "a.kcr", tmp_path / "a.kcr")
    assert code == 0 and "the recordings agree" in out


# -- the format and the handles, without kernels ------------------------------------------

def test_call_key():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert call_key([a], {"x": 1, "y": 2.5}) == call_key([a.copy()], {"y": 2.5, "x": 1})
    assert call_key([a]) != call_key([a.astype(np.float64)])
    assert call_key([a]) != call_key([a.reshape(3, 2)])
    assert call_key([a]) != call_key([a], {"causal": True})
    b = a.copy()
    b[0, 0] = -0.0
    assert call_key([a]) != call_key([b])  # bytes, not values


def _synthetic():
    out = np.array([[1.5, -2.25], [np.nan, np.inf]], dtype=ml_dtypes.bfloat16)
    calls = [RecordedCall("k1", 0, CallResult("ok", out=out, meta={"shape": [2, 2]}, seconds=0.1),
                          ["c1"]),
             RecordedCall("k1", 1, CallResult("ok", out=out * 2), ["c1"]),
             RecordedCall("k2", 0, CallResult("raised", error="index 7 is out of bounds",
                                              error_type="IndexError"), ["c2"])]
    manifest = {"schema": "kcontract.recording/1", "kernel": "k.py:f", "op": "sum",
                "dtype": "bfloat16", "kernel_info": {"accepts": ["x"]}, "suite_version": "0.1.0"}
    return Recording(manifest, calls)


def test_recording_round_trip(tmp_path):
    path = _synthetic().save(str(tmp_path / "x.kcr"))
    back = Recording.load(path)
    assert back.manifest["kernel"] == "k.py:f"
    assert [(c.key, c.occurrence, c.result.status, c.contracts) for c in back.calls] == \
        [("k1", 0, "ok", ["c1"]), ("k1", 1, "ok", ["c1"]), ("k2", 0, "raised", ["c2"])]
    got = back.calls[0].result.out
    assert got.dtype == ml_dtypes.bfloat16 and got.shape == (2, 2)
    assert got.view(np.uint16).tolist() == _synthetic().calls[0].result.out.view(np.uint16).tolist()
    assert back.calls[2].result.error_type == "IndexError" and back.calls[2].result.out is None


def test_replay_serves_by_key_and_occurrence_and_refuses_the_unrecorded():
    rec = _synthetic()
    x = np.ones(3)
    rec.calls[0].key = rec.calls[1].key = call_key([x])
    h = ReplayHandle(rec)
    first, second = h.call([x]), h.call([x])
    assert first.out[0, 0] == 1.5 and second.out[0, 0] == 3.0  # repeated calls in order
    first.out[0, 0] = 99  # the recording itself is never modified
    assert rec.calls[0].result.out[0, 0] == 1.5
    with pytest.raises(ReplayError, match="no outcome for a call"):
        h.call([np.zeros(3)])
    # a third call with a key recorded twice is not served the last outcome again
    with pytest.raises(ReplayError, match="occurrence 2"):
        h.call([x])
    assert issubclass(ReplayError, UsageError)  # exit 2, never a verdict


def test_arbitrating_different_ops_is_a_usage_error(tmp_path):
    a = _synthetic()
    b = _synthetic()
    b.manifest["op"] = "matmul"
    with pytest.raises(UsageError, match="different ops"):
        arbitrate(a, b)


def test_not_a_recording(run_cli, tmp_path):
    junk = tmp_path / "junk.kcr"
    junk.write_text("hello")
    assert run_cli("arbitrate", junk, junk)[0] == 2
    assert run_cli("arbitrate", tmp_path / "none.kcr", junk)[0] == 2


def test_sides_with_different_claims_are_noted_and_each_judged_by_its_own(tmp_path):
    """The clamping gather declares oob=clamp: it conforms, and the note says the two sides
    declared different policies."""
    a = record(f"{DISPUTE / 'stack_a.py'}:embedding", op="embedding", dtype="float32",
               classes=["C-EXC-02"], declare={"oob": "clamp"})
    b = record(f"{DISPUTE / 'stack_b.py'}:embedding", op="embedding", dtype="float32",
               classes=["C-EXC-02"])
    arb = arbitrate(a, b).to_json()
    assert arb["violators"] == []
    assert any("declared different claims (oob: A clamp, B raise)" in n for n in arb["notes"])


def test_arbitration_compares_primary_causes():
    from kcontract.records.arbitrate import compare_causes
    from kcontract.check.verdict import ContractResult, RunResult, Status, Violation, Case
    case = Case(shape={"M": 1}, dtype="float32", seed=0, family="normal")

    def run(results):
        return RunResult(kernel="k", op="matmul", dtype="float32", framework="numpy",
                         device="cpu", claims={}, environment={}, results=results)
    bad = ContractResult(contract="C-PRC-04", id="prc04-matmul", verdict=Status.VIOLATION,
                         message="operands rounded to fp16 (4 of 4 cases fail)",
                         signature={"code": "C-PRC-04.format-substitution"},
                         violation=Violation("prc04-matmul", "C-PRC-04", case,
                                             "C-PRC-04.format-substitution", "m"))
    good = ContractResult(contract="C-PRC-04", id="prc04-matmul", verdict=Status.PASS)
    got = compare_causes(run([good]), run([bad]), "A", "B")
    assert not got["same"] and got["A"] == [] and got["B"][0]["class"] == "C-PRC-04"
    assert "operands rounded to fp16" in got["statement"]
    assert compare_causes(run([bad]), run([bad]), "A", "B")["same"]
