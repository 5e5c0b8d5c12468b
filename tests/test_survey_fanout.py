"""Fan-out on this machine: --workers N gives the serial matrix, loses no cell (a pool
process that dies is run again or reported), loses no run in the store, and deals the
visible accelerators out among the processes."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from kcontract.survey import Cell, CellResult, Processes, Serial, survey
from kcontract.survey.cells import LOST, run_cell
from kcontract.survey.devices import ray_resources, visible_ids, worker_environments

OPS = ["sum", "embedding"]
DTYPES = ["float32"]


def test_workers_give_the_serial_matrix_and_every_run_reaches_the_store(tmp_path):
    from kcontract.records.store import history
    serial = survey("numpy", ops=OPS, dtypes=DTYPES, executor=Serial(), record_runs=False)
    store = tmp_path / "results.db"
    par = survey("numpy", ops=OPS, dtypes=DTYPES, executor=Processes(2), store=str(store))
    assert par.outcome() == serial.outcome()
    assert par.executor == "2 processes"
    pids = {c.where["pid"] for c in par.cells.values()}
    assert os.getpid() not in pids  # the cells ran in the pool's processes
    runs = history(str(store))
    assert len(runs) == len(par.cells) == 2
    assert sorted(r.id for r in runs) == sorted(c.run_id for c in par.cells.values())


def dies_once(cell: Cell) -> CellResult:
    """A cell function whose process is killed the first time it runs a cell."""
    marker = Path(os.environ["KC_SURVEY_FAULT_DIR"]) / f"{cell.op}-{cell.dtype}"
    if cell.op == "sum" and not marker.exists():
        marker.write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    return run_cell(cell)


def always_dies(cell: Cell) -> CellResult:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_pool_process_is_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("KC_SURVEY_FAULT_DIR", str(tmp_path))
    cells = [Cell("numpy", "cpu", op, "float32", classes=("C-ORD-02",)) for op in OPS]
    results = {r.op: r for r in Processes(2, retries=1).run(cells, dies_once)}
    assert set(results) == set(OPS)
    assert results["sum"].status == "checked" and results["sum"].attempts == 2
    assert (tmp_path / "sum-float32").exists()


def test_a_cell_that_keeps_dying_is_reported_lost_not_dropped():
    cells = [Cell("numpy", "cpu", "sum", "float32")]
    [res] = list(Processes(1, retries=1).run(cells, always_dies))
    assert res.status == LOST and res.attempts == 2 and "died" in res.error


def report_visibility(cell: Cell) -> CellResult:
    from kcontract.survey.cells import where_am_i
    return CellResult(cell.op, cell.dtype, "checked", where=where_am_i())


def test_each_worker_process_sees_its_share_of_the_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    cells = [Cell("torch", "cuda", op, "float32") for op in ("a", "b", "c", "d")]
    seen = [r.where["visible_devices"]["CUDA_VISIBLE_DEVICES"]
            for r in Processes(2).run(cells, report_visibility)]
    assert set(seen) <= {"5", "7"} and len(seen) == 4  # one device each, never both


@pytest.mark.parametrize("var, device", [("CUDA_VISIBLE_DEVICES", "cuda"),
                                         ("HIP_VISIBLE_DEVICES", "cuda"),
                                         ("ROCR_VISIBLE_DEVICES", "gpu"),
                                         ("ASCEND_RT_VISIBLE_DEVICES", "npu")])
def test_visibility_variables_are_dealt_out_round_robin(var, device):
    env = {var: "2, 3"}
    assert visible_ids(device, env) == (var, ["2", "3"])
    assert worker_environments(device, 3, env) == [{var: "2"}, {var: "3"}, {var: "2"}]
    # an explicit index, one device, or no restriction: nothing to divide
    assert worker_environments(f"{device}:1", 2, env) == [{}, {}]
    assert worker_environments(device, 2, {var: "4"}) == [{}, {}]
    assert worker_environments("cpu", 2, env) == [{}, {}]


def test_ray_resources_follow_the_device():
    assert ray_resources("cpu") == {"num_cpus": 1}
    assert ray_resources("cuda:1") == {"num_cpus": 1, "num_gpus": 1}
    assert ray_resources("gpu") == {"num_cpus": 1, "num_gpus": 1}
    assert ray_resources("tpu") == {"num_cpus": 1, "resources": {"TPU": 1}}
    assert ray_resources("npu") == {"num_cpus": 1, "resources": {"NPU": 1}}
    assert ray_resources("cpu", {"accel_a": 1}) == {"num_cpus": 1, "resources": {"accel_a": 1}}
