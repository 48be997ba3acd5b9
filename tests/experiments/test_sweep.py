"""Sweeps: expansion into cells, stable cell ids, running, resuming after an interruption."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tcpdelay.errors import EnvironmentNotSupported, ParameterError
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.experiments.sweep import _Lock, cell_id, default_jobs, expand, run_sweep, units
from tcpdelay.results.layout import COMPLETE, FAILED

SCENARIO = {
    "name": "t", "duration_s": 10, "repetitions": 2,
    "path": {"rtt_s": 0.1, "loss": {"model": "bernoulli", "p": 0.0}},
    "flows": [{"profile": "voip"}],
    "sweep": {"path.loss.p": [0.01, 0.02, 0.05], "flows[0].transport": ["tcp", "udp"]},
}


def scenario(**kw):
    return parse_scenario({**SCENARIO, **kw})


# A trivial cell runner: a real function of the scenario and seed that writes a result file.
# It appends to a log so tests can see which units ran.
def loss_runner(sc, seed, run_dir):
    p = sc.path.direction("forward").loss.p
    (run_dir / "result.json").write_text(json.dumps({"p": p, "seed": seed}))
    with open(os.environ["SWEEP_TEST_LOG"], "a") as log:
        log.write(f"{p} {sc.flows[0].transport} {seed}\n")
    if os.environ.get("SWEEP_TEST_FAIL_P") == str(p):
        raise ValueError(f"cannot run p={p}")
    if os.environ.get("SWEEP_TEST_INTERRUPT_P") == str(p):
        raise KeyboardInterrupt
    return {"expected_lost": p * 100}


def env_unsupported_runner(sc, seed, run_dir):
    raise EnvironmentNotSupported("needs root")


@pytest.fixture
def log(tmp_path, monkeypatch):
    path = tmp_path / "log.txt"
    path.write_text("")
    monkeypatch.setenv("SWEEP_TEST_LOG", str(path))
    monkeypatch.delenv("SWEEP_TEST_FAIL_P", raising=False)
    monkeypatch.delenv("SWEEP_TEST_INTERRUPT_P", raising=False)
    return path


def ran(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_expand_is_the_product_in_order():
    cells = expand(scenario())
    assert [c.overrides for c in cells[:3]] == [
        {"path.loss.p": 0.01, "flows[0].transport": "tcp"},
        {"path.loss.p": 0.01, "flows[0].transport": "udp"},
        {"path.loss.p": 0.02, "flows[0].transport": "tcp"},
    ]
    assert len(cells) == 6 and [c.index for c in cells] == list(range(6))
    assert cells[3].scenario.path.loss.p == 0.02 and cells[3].scenario.flows[0].transport == "udp"
    assert len({c.id for c in cells}) == 6
    assert all(len(c.id) == 12 and int(c.id, 16) >= 0 for c in cells)


def test_cell_ids_are_stable_and_depend_only_on_what_is_measured():
    a = {c.label: c.id for c in expand(scenario())}
    # Same parameters, other name, metrics, seeds, repetitions, description: same ids.
    b = {c.label: c.id for c in expand(scenario(name="other", repetitions=5, seed=9,
                                                 metrics=["delay"], description="x"))}
    assert a == b
    # A cell reached from a different sweep has the id of the same parameters.
    single = expand(scenario(sweep={"path.loss.p": [0.02]}))[0]
    assert single.id == a["path.loss.p=0.02 flows[0].transport='tcp'"]
    # Anything measured changes every id.
    c = {c.label: c.id for c in expand(scenario(duration_s=11))}
    assert not set(a.values()) & set(c.values())
    # Known value: the id is a hash of canonical data, not of memory addresses or order.
    assert cell_id(parse_scenario({"duration_s": 10, "flows": [{"profile": "voip"}]})) == \
        cell_id(parse_scenario({"flows": [{"profile": "voip"}], "duration_s": 10.0}))


def test_duplicate_grid_points_are_one_cell():
    cells = expand(scenario(sweep={"path.loss.p": [0.01, 0.01, 0.02]}))
    assert len(cells) == 2


def test_units_and_seeds(tmp_path):
    us = units(expand(scenario(seeds=[4, 7])), tmp_path)
    assert len(us) == 12
    assert us[0].run_dir == tmp_path / "cells" / us[0].cell.id / "seed-4"
    assert [u.seed for u in us[:2]] == [4, 7]


def test_run_then_rerun_skips_everything(tmp_path, log):
    res = run_sweep(scenario(), tmp_path, loss_runner, progress=False)
    assert (res.cells, res.units, res.ran, res.skipped, res.failed) == (6, 12, 12, 0, [])
    assert len(ran(log)) == 12
    index = json.loads((tmp_path / "sweep.json").read_text())
    assert len(index["cells"]) == 6 and index["seeds"] == [1, 2]
    for c in expand(scenario()):
        cell_dir = tmp_path / "cells" / c.id
        assert json.loads((cell_dir / "cell.json").read_text())["overrides"] == c.overrides
        assert "sweep" not in (cell_dir / "scenario.toml").read_text()
        for seed in (1, 2):
            done = json.loads((cell_dir / f"seed-{seed}" / COMPLETE).read_text())
            assert done["summary"] == {"expected_lost": c.scenario.path.loss.p * 100}
            assert json.loads((cell_dir / f"seed-{seed}" / "result.json").read_text())["seed"] == seed
    again = run_sweep(scenario(), tmp_path, loss_runner, progress=False)
    assert (again.ran, again.skipped) == (0, 12)
    assert len(ran(log)) == 12
    # More repetitions reuse what exists and run only the new seeds.
    more = run_sweep(scenario(repetitions=3), tmp_path, loss_runner, progress=False)
    assert (more.ran, more.skipped) == (6, 12)
    assert all(line.endswith(" 3") for line in ran(log)[12:])


def test_interrupted_sweep_resumes(tmp_path, log, monkeypatch):
    monkeypatch.setenv("SWEEP_TEST_INTERRUPT_P", "0.02")
    with pytest.raises(KeyboardInterrupt):
        run_sweep(scenario(), tmp_path, loss_runner, progress=False)
    first = ran(log)
    assert len(first) == 5  # 4 units of p=0.01, then the interrupted one
    partial = [d for d in (tmp_path / "cells").glob("*/seed-*") if not (d / COMPLETE).exists()]
    assert len(partial) == 1 and (partial[0] / FAILED).exists()
    monkeypatch.delenv("SWEEP_TEST_INTERRUPT_P")
    res = run_sweep(scenario(), tmp_path, loss_runner, progress=False)
    assert (res.ran, res.skipped, res.failed) == (8, 4, [])
    assert not (partial[0] / FAILED).exists() and (partial[0] / COMPLETE).exists()
    assert sorted(ran(log)[5:]) == sorted(f"{p} {t} {s}" for p in (0.02, 0.05) for t in ("tcp", "udp") for s in (1, 2))


def test_a_failing_cell_is_recorded_and_the_rest_go_on(tmp_path, log, monkeypatch):
    monkeypatch.setenv("SWEEP_TEST_FAIL_P", "0.05")
    res = run_sweep(scenario(), tmp_path, loss_runner, progress=False)
    assert res.ran == 8 and len(res.failed) == 4
    assert all("cannot run p=0.05" in f["error"] for f in res.failed)
    for f in res.failed:
        assert "ValueError" in json.loads((Path(f["run_dir"]) / FAILED).read_text())["error"]
    monkeypatch.delenv("SWEEP_TEST_FAIL_P")
    res = run_sweep(scenario(), tmp_path, loss_runner, progress=False)
    assert (res.ran, res.skipped, res.failed) == (4, 8, [])


def test_environment_not_supported_stops_the_sweep(tmp_path):
    with pytest.raises(EnvironmentNotSupported):
        run_sweep(scenario(), tmp_path, env_unsupported_runner, progress=False)


@pytest.mark.slow
def test_parallel_jobs(tmp_path, log):
    res = run_sweep(scenario(), tmp_path, loss_runner, jobs=3, progress=False)
    assert (res.ran, res.failed) == (12, [])
    assert len(list((tmp_path / "cells").glob(f"*/seed-*/{COMPLETE}"))) == 12
    assert run_sweep(scenario(), tmp_path, loss_runner, jobs=3, progress=False).skipped == 12


def test_one_writer_per_directory_and_jobs_checked(tmp_path):
    with _Lock(tmp_path):
        with pytest.raises(ParameterError, match="another run or sweep is writing there"):
            run_sweep(scenario(), tmp_path, loss_runner, progress=False)
    with pytest.raises(ParameterError, match="jobs: 0 must be an integer >= 1"):
        run_sweep(scenario(), tmp_path, loss_runner, jobs=0, progress=False)
    assert default_jobs() >= 1


SLEEPY = '''
import json, sys, time
from pathlib import Path
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.experiments.sweep import run_sweep

def sleepy(sc, seed, run_dir):
    time.sleep(120)

if __name__ == "__main__":
    sc = parse_scenario({"duration_s": 5, "flows": [{"profile": "voip"}],
                         "sweep": {"path.rtt_s": [0.01, 0.02, 0.03, 0.04]}})
    run_sweep(sc, sys.argv[1], sleepy, jobs=2, progress=False)
'''


@pytest.mark.slow
def test_interrupted_parallel_sweep_stops_at_once_and_starts_nothing_new(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "sleepy.py").write_text(SLEEPY)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(tmp_path / "sleepy.py"), str(out)], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(list(out.glob("cells/*/seed-1"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    t = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole process group
    _, err = proc.communicate(timeout=30)
    # waiting for the running units would take ~120 s; stopping at once takes a fraction of that
    # on any machine (no bound a busy machine breaks)
    assert time.monotonic() - t < 60, "the sweep waited for its runs instead of stopping"
    assert "KeyboardInterrupt" in err
    started = list(out.glob("cells/*/seed-1"))
    assert len(started) == 2  # the two running units; the queued ones never started
    assert all((d / FAILED).exists() and not (d / COMPLETE).exists() for d in started)


def records_runner(sc, seed, run_dir):
    """Writes real per-packet records (the writer tcpdelay send/recv use): 50 packets, every
    tenth never received, delay 10 ms + seed ms."""
    from tcpdelay.records import RecordWriter, write_run_metadata

    with RecordWriter(run_dir, "sent", writer_id="s") as ws, RecordWriter(run_dir, "received", writer_id="r") as wr:
        for seq in range(50):
            t = 1000.0 + seq * 0.02
            ws.append(flow_id=0, connection=0, seq=seq, size_bytes=174, send_time_s=t,
                      frame_id=-1, frame_type="", frame_last=True, dropped=False)
            if seq % 10:
                wr.append(flow_id=0, connection=0, seq=seq, size_bytes=174, send_time_s=t,
                          recv_time_s=t + 0.010 + seed / 1000)
    write_run_metadata(run_dir, {"clock": "shared-monotonic"})
    return {}


def test_a_complete_run_keeps_its_records_in_packets_parquet(tmp_path, log):
    """The sweep joins a run's record parts into packets.parquet before marking it complete (what
    a committed result keeps); a runner that writes no records gets none."""
    import numpy as np

    from tcpdelay.results.packets import read_run_packets

    sc = scenario(sweep={"path.loss.p": [0.01]}, repetitions=2)
    run_sweep(sc, tmp_path / "rec", records_runner, progress=False)
    runs = sorted((tmp_path / "rec" / "cells").glob("*/seed-*"))
    assert len(runs) == 2
    for rd in runs:
        seed = int(rd.name.split("-")[1])
        assert (rd / COMPLETE).is_file()
        assert (rd / "packets.parquet").stat().st_mtime_ns <= (rd / COMPLETE).stat().st_mtime_ns
        (flow,) = read_run_packets(rd).flows
        assert flow.flow_id == 0 and list(flow.seq) == list(range(50))
        np.testing.assert_allclose(flow.delay_s[np.arange(50) % 10 != 0], 0.010 + seed / 1000, atol=1e-6)
        assert np.isnan(flow.delay_s[::10]).all()
    run_sweep(sc, tmp_path / "none", loss_runner, progress=False)
    assert not list((tmp_path / "none").rglob("packets.parquet"))


def test_shards_are_disjoint_and_their_union_is_the_whole_sweep(tmp_path, log):
    from tcpdelay.experiments.sweep import parse_shard

    sc = scenario()
    whole = run_sweep(sc, tmp_path / "whole", loss_runner, progress=False)
    ran = []
    for i in (1, 2, 3):
        res = run_sweep(sc, tmp_path / f"shard{i}", loss_runner, progress=False, shard=parse_shard(f"{i}/3"))
        done = sorted(str(p.parent.relative_to(tmp_path / f"shard{i}")) for p in (tmp_path / f"shard{i}").glob(f"cells/*/seed-*/{COMPLETE}"))
        assert res.ran == len(done) == res.units == 4 and res.to_dict()["shard"] == f"{i}/3"
        ran += done
    assert sorted(ran) == sorted(str(p.parent.relative_to(tmp_path / "whole"))
                                 for p in (tmp_path / "whole").glob(f"cells/*/seed-*/{COMPLETE}"))
    assert len(ran) == len(set(ran)) == whole.ran == 12
    for bad in ("0/3", "4/3", "3/2", "1/0", "a/b", "2"):
        with pytest.raises(ParameterError, match="shard"):
            parse_shard(bad)


def test_random_order_runs_every_unit_in_a_seeded_shuffle(tmp_path, log):
    sc = scenario()
    orders = []
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        Path(os.environ["SWEEP_TEST_LOG"]).write_text("")
        run_sweep(sc, tmp_path / name, loss_runner, progress=False, order="random", order_seed=seed)
        orders.append(Path(os.environ["SWEEP_TEST_LOG"]).read_text().splitlines())
    Path(os.environ["SWEEP_TEST_LOG"]).write_text("")
    run_sweep(sc, tmp_path / "grid", loss_runner, progress=False)
    grid_order = Path(os.environ["SWEEP_TEST_LOG"]).read_text().splitlines()
    assert orders[0] == orders[1] != orders[2] and sorted(orders[0]) == sorted(grid_order) and orders[0] != grid_order
    with pytest.raises(ParameterError, match="order"):
        run_sweep(sc, tmp_path / "x", loss_runner, progress=False, order="backwards")


def test_merging_the_shards_gives_the_whole_sweep_and_refuses_another(tmp_path, log):
    from tcpdelay.experiments.sweep import parse_shard
    from tcpdelay.results.merge import merge

    sc = scenario()
    for i in (1, 2):
        run_sweep(sc, tmp_path / f"s{i}", loss_runner, progress=False, shard=parse_shard(f"{i}/2"))
    whole = tmp_path / "whole"
    run_sweep(sc, whole, loss_runner, progress=False)
    res = merge([tmp_path / "s1", tmp_path / "s2"], tmp_path / "m")
    assert (res.copied, res.not_complete, res.runs, res.conflicts) == (12, 0, 12, [])

    def files(d):
        return sorted(str(p.relative_to(d)) for p in d.rglob("*") if not p.name.startswith("."))
    assert files(tmp_path / "m") == files(whole)
    for p in (whole).glob("cells/*/seed-*/result.json"):
        assert (tmp_path / "m" / p.relative_to(whole)).read_text() == p.read_text()
    # resuming the merged directory measures nothing: every run is there
    Path(os.environ["SWEEP_TEST_LOG"]).write_text("")
    again = run_sweep(sc, tmp_path / "m", loss_runner, progress=False)
    assert again.ran == 0 and again.skipped == 12
    assert merge([tmp_path / "s1"], tmp_path / "m").already == 12
    other = scenario(sweep={"path.loss.p": [0.03]})
    run_sweep(other, tmp_path / "o", loss_runner, progress=False)
    with pytest.raises(ParameterError, match="another sweep"):
        merge([tmp_path / "s1", tmp_path / "o"], tmp_path / "m2")
    with pytest.raises(ParameterError, match="not a sweep directory"):
        merge([tmp_path / "nothing"], tmp_path / "m3")
    # as a user runs it
    import subprocess
    import sys

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "tcpdelay", "sweep", "merge", *map(str, args)],
                              capture_output=True, text=True, timeout=120)
    ok = cli(tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "m4", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["copied"] == 12
    bad = cli(tmp_path / "s1", tmp_path / "o", "--out", tmp_path / "m5")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "another sweep" in bad.stderr
    assert cli(tmp_path / "s1").returncode == 2       # no --out


def test_a_sweep_writes_its_tidy_table(tmp_path, log, monkeypatch):
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    monkeypatch.setenv("SWEEP_TEST_FAIL_P", "0.05")
    sc = scenario()
    run_sweep(sc, tmp_path / "t", loss_runner, progress=False)
    table = pq.read_table(tmp_path / "t" / "runs.parquet").to_pylist()
    csv = pacsv.read_csv(tmp_path / "t" / "runs.csv")
    assert len(table) == csv.num_rows == 12 and csv.column_names == list(table[0])
    assert {r["param:path.loss.p"] for r in table} == {0.01, 0.02, 0.05}
    assert {r["param:flows[0].transport"] for r in table} == {"tcp", "udp"}
    bad = [r for r in table if r["param:path.loss.p"] == 0.05]
    assert all(r["status"] == "failed" and "cannot run" in r["error"] for r in bad)
    assert all(r["status"] == "complete" and r["wall_s"] is not None for r in table if r["param:path.loss.p"] != 0.05)
    assert [(r["cell_id"], r["seed"]) for r in table][:2] == [(table[0]["cell_id"], 1), (table[0]["cell_id"], 2)]


def test_the_wall_time_estimate_schedules_whole_runs():
    from tcpdelay.experiments.sweep import estimate_wall_s

    assert estimate_wall_s([305.0] * 840, 100) == 9 * 305.0        # 9 rounds, not 8.4
    assert estimate_wall_s([305.0] * 840, 1) == 840 * 305.0
    assert estimate_wall_s([10.0, 1.0, 1.0, 1.0], 2) == 10.0         # the long run alone on one slot
    assert estimate_wall_s([], 4) == 0.0
    with pytest.raises(ParameterError):
        estimate_wall_s([1.0], 0)


def test_a_sweep_resumed_in_place_keeps_the_format_version_it_was_written_in(tmp_path):
    """An index of format 1 (no version recorded, as every sweep committed before format 2) stays
    1 when the sweep is prepared again over it — its runs are version 1, and a rerun that
    measures nothing must not stamp the index newer than them; a new sweep is the current
    version."""
    from tcpdelay.experiments.sweep import prepare
    from tcpdelay.results.version import FORMAT_VERSION, VERSION_KEY

    sc = parse_scenario({"name": "v", "duration_s": 1, "flows": [{"profile": "voip"}],
                         "sweep": {"path.rtt_s": [0.1, 0.2]}})
    cells = expand(sc)
    new, old = tmp_path / "new", tmp_path / "old"
    new.mkdir()
    old.mkdir()
    prepare(sc, new, cells)
    assert json.loads((new / "sweep.json").read_text())[VERSION_KEY] == FORMAT_VERSION
    (old / "sweep.json").write_text(json.dumps({"name": "v", "seeds": [1], "cells": []}))
    prepare(sc, old, cells)
    doc = json.loads((old / "sweep.json").read_text())
    assert VERSION_KEY not in doc and [c["id"] for c in doc["cells"]] == [c.id for c in cells]
    prepare(sc, new, cells)                     # a current-version sweep resumed stays current
    assert json.loads((new / "sweep.json").read_text())[VERSION_KEY] == FORMAT_VERSION

