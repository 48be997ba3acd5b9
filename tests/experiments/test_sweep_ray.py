"""Sweeps on Ray (``--engine ray``): a local Ray cluster of two CPUs and a ``testbed`` resource
of 1 runs small real sweeps — ns-3 units and testbed units — and its directory equals a local
run's (same files, cell ids and markers; the same records for the same seeds); a worker killed
mid-unit is retried and nothing else is lost; a unit that fails comes back with its
``failed.json``."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import ray

from tcpdelay.experiments.ray_engine import WORK_PREFIX, pack_dir, unpack_into
from tcpdelay.experiments.run import run_scenario
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.experiments.sweep import run_sweep
from tcpdelay.results import markers

# One Ray cluster for the module (a module fixture): under pytest-xdist every test of the file goes
# to one worker, so it starts once, and never two clusters side by side.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

VOIP = {
    "name": "ray-voip", "duration_s": 5, "repetitions": 2,
    "path": {"rtt_s": 0.1, "loss": {"model": "bernoulli", "p": 0.01}},
    "flows": [{"name": "voip", "profile": "voip", "transport": "tcp", "tcp": {"preset": "newreno-2008"}}],
    "sweep": {"path.loss.p": [0.01, 0.03]},
}
# Things a run records about its own execution, which differ between any two runs of a unit.
TIMING_FILES = {"run.json", "complete.json", "environment.json", "result.json"}


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, resources={"testbed": 1}, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # this file's runners, for the workers
    yield
    ray.shutdown()


def files(out: Path) -> set[str]:
    """The files under ``out``, a record kind's parts as one name (how many parts a run writes
    depends on its timing: the writers flush every so many rows or seconds)."""
    names = set()
    for p in out.rglob("*"):
        if p.is_file() and p.name != ".lock":
            rel = p.relative_to(out)
            names.add(str(rel.parent / "part-*") if rel.name.startswith("part-") else str(rel))
    return names


def runs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.glob("cells/*/seed-*/complete.json"))


def assert_same_sweep(got: Path, want: Path, *, records_equal, measured: tuple[str, ...] = ()) -> None:
    """Same files, the same complete runs with the same markers, the records compared by
    ``records_equal(got_table, want_table)``, every other file byte for byte but those named in
    ``measured`` (on the testbed, what is computed from measured times: metrics.json)."""
    assert files(got) == files(want)
    assert [r.relative_to(got) for r in runs(got)] == [r.relative_to(want) for r in runs(want)]
    assert runs(got), "no run completed"
    for g in runs(got):
        w = want / g.relative_to(got)
        mg, mw = (json.loads((d / "complete.json").read_text()) for d in (g, w))
        assert (mg["cell_id"], mg["seed"], mg["format_version"]) == (mw["cell_id"], mw["seed"], mw["format_version"])
        records_equal(pq.read_table(g / "packets.parquet"), pq.read_table(w / "packets.parquet"))
    for rel in files(got):
        p = Path(rel)
        if p.name == "part-*":
            continue
        if p.name in TIMING_FILES or p.name in measured or p.suffix in (".parquet", ".csv") or "flows" in p.parts:
            continue
        assert (got / rel).read_bytes() == (want / rel).read_bytes(), rel


def identical(a, b):
    assert a.equals(b)


@pytest.fixture(scope="module")
def ns3_local(tmp_path_factory):
    """The ns-3 sweep run here, unit after unit: what the Ray runs must equal."""
    out = tmp_path_factory.mktemp("local") / "out"
    res = run_sweep(parse_scenario(VOIP), out, functools.partial(run_scenario, backend="ns3"), progress=False)
    assert res.ran == 4 and not res.failed
    return out


@pytest.mark.ns3
def test_ns3_units_on_ray_equal_a_local_run(cluster, ns3_local, tmp_path):
    where = []
    res = run_sweep(parse_scenario(VOIP), tmp_path / "ray", functools.partial(run_scenario, backend="ns3"),
                    engine="ray", testbed=False, progress=False, on_started=lambda u, node, pid: where.append(node))
    assert res.ran == 4 and not res.failed and len(where) == 4
    assert_same_sweep(tmp_path / "ray", ns3_local, records_equal=identical)
    # resume, report and the tidy table read it as a local sweep
    again = run_sweep(parse_scenario(VOIP), tmp_path / "ray", functools.partial(run_scenario, backend="ns3"),
                      engine="ray", testbed=False, progress=False)
    assert again.ran == 0 and again.skipped == 4
    assert (tmp_path / "ray" / "runs.parquet").exists()


def killed_once(marker_dir, scenario, seed, run_dir):
    """The ns-3 runner, except that the first attempt at p = 0.01, seed 1 has its worker process
    killed (SIGKILL) in the middle of the unit, after it began to write its run directory."""
    marker = Path(marker_dir) / "killed"
    if scenario.path.direction("forward").loss.p == 0.01 and seed == 1 and not marker.exists():
        marker.write_text(str(os.getpid()))
        (run_dir / "sent").mkdir()
        os.kill(os.getpid(), signal.SIGKILL)
    return run_scenario(scenario, seed, run_dir, backend="ns3")


@pytest.mark.ns3
def test_a_worker_killed_mid_unit_is_retried_and_nothing_else_is_lost(cluster, ns3_local, tmp_path):
    attempts: dict[str, list[int]] = {}
    res = run_sweep(parse_scenario(VOIP), tmp_path / "ray", functools.partial(killed_once, str(tmp_path)),
                    engine="ray", testbed=False, progress=False,
                    on_started=lambda unit, node, pid: attempts.setdefault(unit.label, []).append(pid))
    killed_pid = int((tmp_path / "killed").read_text())
    retried = [label for label, pids in attempts.items() if len(pids) > 1]
    assert retried == ["path.loss.p=0.01 seed=1"] and attempts[retried[0]][0] == killed_pid
    assert res.ran == 4 and not res.failed
    assert_same_sweep(tmp_path / "ray", ns3_local, records_equal=identical)
    # the killed attempt's temporary directory was removed by a later unit on the node
    assert not list(Path(tempfile.gettempdir()).glob(f"{WORK_PREFIX}{killed_pid}-*"))


def fails_on_high_loss(scenario, seed, run_dir):
    """A runner (sent to the workers by value) that measures nothing and fails at p = 0.03."""
    p = scenario.path.direction("forward").loss.p
    (run_dir / "note.txt").write_text(f"p={p} seed={seed}\n")
    if p > 0.02:
        raise ValueError(f"cannot run p={p}")
    return {"p": p}


def test_a_unit_that_fails_comes_back_with_its_failed_marker(cluster, tmp_path):
    res = run_sweep(parse_scenario(VOIP), tmp_path / "ray", fails_on_high_loss, engine="ray", testbed=False,
                    progress=False)
    assert res.ran == 2 and len(res.failed) == 2
    assert all("cannot run p=0.03" in f["error"] for f in res.failed)
    for f in res.failed:
        status = markers.read_status(Path(f["run_dir"]))
        assert status.status == "failed" and "cannot run p=0.03" in status.error
        assert (Path(f["run_dir"]) / "note.txt").read_text().startswith("p=0.03")   # its files came back too
    assert len(runs(tmp_path / "ray")) == 2


@pytest.mark.testbed
def test_testbed_units_on_ray_equal_a_local_run(cluster, tmp_path):
    """Real Linux TCP through the emulator, each unit holding the node's one testbed slot: the
    same layout and markers as a local run, and the same packets sent (sequence numbers and
    sizes) for the same seeds; the times are measured, so they differ."""
    scenario = parse_scenario({**VOIP, "duration_s": 3, "repetitions": 1})
    local = run_sweep(scenario, tmp_path / "local", run_scenario, progress=False)
    assert local.ran == 2 and not local.failed

    def same_packets_sent(a, b):
        cols = ["flow_id", "seq", "size_bytes", "frame_id"]
        assert a.select(cols).sort_by([("flow_id", "ascending"), ("seq", "ascending")]).equals(
            b.select(cols).sort_by([("flow_id", "ascending"), ("seq", "ascending")]))
        assert a.num_rows > 100

    res = run_sweep(scenario, tmp_path / "ray", run_scenario, engine="ray", testbed=True, progress=False)
    assert res.ran == 2 and not res.failed
    assert_same_sweep(tmp_path / "ray", tmp_path / "local", records_equal=same_packets_sent,
                      measured=("metrics.json",))


def test_a_run_directory_travels_as_files(tmp_path):
    src = tmp_path / "src"
    (src / "sent").mkdir(parents=True)
    (src / "sent" / "part-0.parquet").write_bytes(b"\x00\x01parquet")
    (src / "complete.json").write_text("{}")
    dest = tmp_path / "out" / "cells" / "c" / "seed-1"
    dest.mkdir(parents=True)
    (dest / "stale.txt").write_text("an interrupted attempt")
    unpack_into(pack_dir(src), dest)
    assert {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()} == {"sent/part-0.parquet", "complete.json"}
    assert (dest / "sent" / "part-0.parquet").read_bytes() == b"\x00\x01parquet"
    assert not list(dest.parent.glob(".*incoming"))
