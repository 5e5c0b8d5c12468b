"""Fan-out on Ray: a local cluster whose nodes carry different custom resources (standing
for different accelerators).  The survey on it gives the serial matrix, cells that request
a resource run on the node that has it, a task killed mid-run is retried or reported
lost, and every run reaches the store.  One cluster for the module: Ray starts slowly."""
from __future__ import annotations

import os
import signal

import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from kcontract.errors import UsageError  # noqa: E402
from kcontract.survey import Cell, Ray, Serial, survey  # noqa: E402
from kcontract.survey.cells import LOST, run_cell  # noqa: E402

OPS = ["sum", "embedding"]
DTYPES = ["float32", "float16"]
NODE = {"num_cpus": 1, "object_store_memory": 100 * 1024 * 1024}


def _start_cluster():
    c = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    try:
        a = c.add_node(**NODE, resources={"accel_a": 4})
        b = c.add_node(**NODE, resources={"accel_b": 4})
        ray.init(address=c.address, log_to_driver=False)
        c.wait_for_nodes()
    except BaseException:
        ray.shutdown()
        c.shutdown()
        raise
    return c, {"accel_a": a.node_id, "accel_b": b.node_id}


@pytest.fixture(scope="module")
def cluster():
    # a raylet gets 30 s to register (fixed inside Ray): on an overloaded machine the first
    # start can miss it, so start again before giving up
    for attempt in range(3):
        try:
            c, nodes = _start_cluster()
            break
        except Exception:
            if attempt == 2:
                raise
    yield nodes
    ray.shutdown()
    c.shutdown()


@pytest.fixture(scope="module")
def serial():
    return survey("numpy", ops=OPS, dtypes=DTYPES, executor=Serial(), record_runs=False)


def test_ray_gives_the_serial_matrix_and_the_driver_records_every_run(cluster, serial, tmp_path):
    from kcontract.records.store import history
    store = tmp_path / "results.db"
    m = survey("numpy", ops=OPS, dtypes=DTYPES, executor=Ray(), store=str(store))
    assert m.outcome() == serial.outcome()
    assert all("ray_node" in c.where for c in m.cells.values())
    runs = history(str(store))
    assert sorted(r.id for r in runs) == sorted(c.run_id for c in m.cells.values())
    assert len(runs) == len(OPS) * len(DTYPES)


@pytest.mark.parametrize("resource", ["accel_a", "accel_b"])
def test_cells_run_on_the_node_with_their_resource(cluster, serial, resource):
    m = survey("numpy", ops=OPS, dtypes=["float32"], executor=Ray(resources={resource: 1}),
               record_runs=False)
    assert {c.where["ray_node"] for c in m.cells.values()} == {cluster[resource]}
    assert m.outcome() == {k: v for k, v in serial.outcome().items() if k[1] == "float32"}


def _killed_first(marker_dir):
    def cell_fn(cell):
        marker = os.path.join(marker_dir, f"{cell.op}-{cell.dtype}")
        if not os.path.exists(marker):
            with open(marker, "w") as fh:
                fh.write(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)  # the Ray worker dies mid-task
        return run_cell(cell)
    return cell_fn


def test_a_task_killed_mid_run_is_retried(cluster, serial, tmp_path):
    cells = [Cell("numpy", "cpu", "sum", "float32")]
    [res] = list(Ray(retries=1).run(cells, _killed_first(str(tmp_path))))
    assert res.status == "checked"
    assert res.outcome() == serial.cell("sum", "float32").outcome()
    assert res.where["pid"] != int((tmp_path / "sum-float32").read_text())  # a new worker


def test_a_task_killed_with_no_retries_left_is_reported_lost(cluster, tmp_path):
    cells = [Cell("numpy", "cpu", "sum", "float32"), Cell("numpy", "cpu", "sum", "float16")]
    (tmp_path / "sum-float16").write_text("")  # this one is not killed
    results = {r.dtype: r for r in Ray(retries=0).run(cells, _killed_first(str(tmp_path)))}
    assert set(results) == {"float32", "float16"}
    assert results["float32"].status == LOST and "died" in results["float32"].error.lower()
    assert results["float16"].status == "checked"


def test_a_resource_no_node_offers_is_a_usage_error(cluster):
    with pytest.raises(UsageError, match="no node of the Ray cluster offers accel_z"):
        survey("numpy", ops=["sum"], dtypes=["float32"], executor=Ray(resources={"accel_z": 1}),
               record_runs=False)
