"""The results layer (:mod:`tcpdelay.results`): the layout of a result on disk, its markers and
format version (a directory without one is version 1, a newer one is refused in one line), the
one join of sent and received records, the one form of a file of packet delays, and every
committed directory under results/ reading through it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tcpdelay.cli import main
from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.experiments.sweep import run_sweep
from tcpdelay.records import RecordWriter, write_run_metadata
from tcpdelay.results import FORMAT_VERSION, load_results
from tcpdelay.results import layout, markers
from tcpdelay.results.packets import (load_flows, read_delays, read_run_packets, run_delays, write_delays,
                                      write_run_packets)
from tcpdelay.results.version import version_of

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
SWEEPS = sorted(p.name for p in RESULTS.iterdir() if (p / layout.SWEEP_INDEX).is_file())


def _records(run_dir: Path, delays_s: list[float], *, lost=(), dup=(), flows=(0,)) -> None:
    """Sent and received records of 20 ms packets (flow f's seq i sent at 100 + i * 0.02 + f);
    seqs in ``lost`` never arrive, seqs in ``dup`` arrive twice (the second 1 s later)."""
    with RecordWriter(run_dir, "sent", writer_id="s") as ws, RecordWriter(run_dir, "received", writer_id="r") as wr:
        for f in flows:
            for seq, d in enumerate(delays_s):
                t = 100.0 + seq * 0.02 + f
                ws.append(flow_id=f, connection=0, seq=seq, size_bytes=174, send_time_s=t,
                          frame_id=-1, frame_type="", frame_last=True, dropped=False)
                if seq in lost:
                    continue
                wr.append(flow_id=f, connection=0, seq=seq, size_bytes=174, send_time_s=t, recv_time_s=t + d)
                if seq in dup:
                    wr.append(flow_id=f, connection=0, seq=seq, size_bytes=174, send_time_s=t, recv_time_s=t + d + 1)
    write_run_metadata(run_dir, {"clock": "shared-monotonic"})


def _code(args) -> int:
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


# --- layout ------------------------------------------------------------------------------------

def test_run_directories_are_named_and_found_by_seed(tmp_path):
    assert layout.run_dir(tmp_path, 4, "abc") == tmp_path / "cells" / "abc" / "seed-4"
    assert layout.run_dir(tmp_path, 4) == tmp_path / "seed-4"
    for s in (10, 2, -1):
        layout.run_dir(tmp_path, s).mkdir(parents=True)
    (tmp_path / "seed-x").mkdir()
    (tmp_path / "seed-3").write_text("a file, not a run")
    assert [layout.seed_of(d) for d in layout.seed_dirs(tmp_path)] == [-1, 2, 10]
    assert layout.seed_of(tmp_path / "seed-x") is None and layout.seed_dirs(tmp_path / "nope") == []
    assert not layout.is_run_dir(tmp_path / "seed-2")
    (tmp_path / "seed-2" / layout.COMPLETE).write_text("{}")
    assert layout.is_run_dir(tmp_path / "seed-2")


def test_find_runs_knows_the_three_shapes(tmp_path):
    sweep = tmp_path / "sweep"
    cells = [{"id": "c2", "label": "x=2", "overrides": {"x": 2}}, {"id": "c1", "label": "x=1", "overrides": {"x": 1}}]
    sweep.mkdir()
    (sweep / layout.SWEEP_INDEX).write_text(json.dumps({"name": "s", "cells": cells}))
    for cid, seeds in (("c1", (2, 1)), ("c2", (5,))):
        for s in seeds:
            layout.run_dir(sweep, s, cid).mkdir(parents=True)
    found = layout.find_runs(sweep)
    assert (found.kind, found.name) == ("sweep", "s")
    assert [(c.id, c.label, c.overrides, [layout.seed_of(d) for d in c.runs]) for c in found.cells] == [
        ("c2", "x=2", {"x": 2}, [5]), ("c1", "x=1", {"x": 1}, [1, 2])]
    assert found.cells[0].entry == cells[0]
    assert [d.name for _, d in found.run_dirs()] == ["seed-5", "seed-1", "seed-2"]
    run = tmp_path / "run"
    layout.run_dir(run, 3).mkdir(parents=True)
    assert layout.find_runs(run).kind == "run"
    _records(tmp_path / "one", [0.05])
    one = layout.find_runs(tmp_path / "one")
    assert one.kind == "single" and one.cells[0].runs == (tmp_path / "one",)
    with pytest.raises(ParameterError, match="neither a sweep directory"):
        layout.find_runs(tmp_path / "run" / "seed-3")
    (sweep / layout.SWEEP_INDEX).write_text(json.dumps({"cells": [{"label": "no id"}]}))
    with pytest.raises(ParameterError, match="is not a sweep index"):
        layout.find_runs(sweep)


# --- markers and the format version -----------------------------------------------------------

def test_markers_say_complete_failed_or_incomplete(tmp_path):
    rd = tmp_path / "seed-1"
    rd.mkdir()
    assert markers.read_status(rd).status == "incomplete"
    markers.reserve(rd)
    doc = markers.write_complete(rd, {"seed": 1, "wall_s": 2.5, "summary": {"a": 1}})
    assert doc["format_version"] == FORMAT_VERSION
    assert json.loads((rd / layout.COMPLETE).read_text()) == doc
    assert not any(p.name.startswith(".failed") for p in rd.iterdir())  # the reserved room given back
    st = markers.read_status(rd)
    assert (st.status, st.wall_s, st.summary) == ("complete", 2.5, {"a": 1}) and markers.is_complete(rd)
    other = tmp_path / "seed-2"
    other.mkdir()
    markers.reserve(other)
    markers.write_failed(other, {"seed": 2, "error": "RuntimeError: boom", "traceback": "..."})
    assert (markers.read_status(other).status, markers.read_status(other).error) == ("failed", "RuntimeError: boom")
    (other / layout.FAILED).write_text("{not json")
    assert markers.read_status(other).error == "failed.json unreadable"


def test_a_missing_version_is_version_1_and_a_newer_one_is_refused():
    assert version_of({}, "x") == 1 and version_of({"format_version": FORMAT_VERSION}, "x") == FORMAT_VERSION
    with pytest.raises(ParameterError, match=f"results format {FORMAT_VERSION + 1}; this tcpdelay reads formats 1 to"):
        version_of({"format_version": FORMAT_VERSION + 1}, "x")
    for bad in ("2", 0, True, 1.5):
        with pytest.raises(ParameterError, match="is not a results format version"):
            version_of({"format_version": bad}, "x")


def _loss_runner(scenario, seed, run_dir):
    _records(run_dir, [0.05] * 10)
    return {"seed": seed}


def test_a_sweep_records_its_format_version_and_reads_back(tmp_path):
    sc = parse_scenario({"name": "v", "duration_s": 10, "seeds": [1, 2],
                         "path": {"rtt_s": 0.1, "loss": {"model": "bernoulli", "p": 0.0}},
                         "flows": [{"profile": "voip"}], "sweep": {"path.loss.p": [0.0, 0.01]}})
    run_sweep(sc, tmp_path, _loss_runner, progress=False)
    assert json.loads((tmp_path / layout.SWEEP_INDEX).read_text())["format_version"] == FORMAT_VERSION
    runs = [d for _, d in layout.find_runs(tmp_path).run_dirs()]
    assert len(runs) == 4
    for rd in runs:
        assert json.loads((rd / layout.COMPLETE).read_text())["format_version"] == FORMAT_VERSION
        assert (rd / layout.PACKETS_FILE).is_file()
    res = load_results(tmp_path)
    assert [r.status for c in res.cells for r in c.runs] == ["complete"] * 4
    # the same directory without any version (as every committed result) reads identically
    for path in [tmp_path / layout.SWEEP_INDEX, *(rd / layout.COMPLETE for rd in runs)]:
        doc = json.loads(path.read_text())
        del doc["format_version"]
        path.write_text(json.dumps(doc))
    old = load_results(tmp_path)
    for c_new, c_old in zip(res.cells, old.cells):
        for r_new, r_old in zip(c_new.runs, c_old.runs):
            assert r_new.status == r_old.status and r_new.wall_s == r_old.wall_s
            for f_new, f_old in zip(r_new.flows, r_old.flows):
                np.testing.assert_array_equal(f_new.delay_s, f_old.delay_s)
                assert f_new.metrics == f_old.metrics


@pytest.mark.parametrize("where", ["sweep", "run"])
def test_report_refuses_a_newer_format_in_one_line(tmp_path, capsys, where):
    sweep = tmp_path / "s"
    rd = layout.run_dir(sweep, 1, "c1")
    rd.mkdir(parents=True)
    _records(rd, [0.05] * 10)
    index = {"name": "s", "cells": [{"id": "c1", "label": "-", "overrides": {}}]}
    marker = {"seed": 1, "wall_s": 1.0, "summary": {}}
    (index if where == "sweep" else marker)["format_version"] = FORMAT_VERSION + 7
    (sweep / layout.SWEEP_INDEX).write_text(json.dumps(index))
    (rd / layout.COMPLETE).write_text(json.dumps(marker))
    assert _code(["report", str(sweep)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"results format {FORMAT_VERSION + 7}" in err, err


# --- the one join -------------------------------------------------------------------------------

def test_the_records_join_once_and_every_reader_gets_the_same_packets(tmp_path):
    """load_flows (the metrics' and the report's packets) and run_delays (the reproduction
    scripts' delays) are the same join: first arrival of each (flow, seq), NaN for a lost packet,
    a duplicate counted; packets.parquet gives the same packets back (to the µs)."""
    rd = tmp_path / "run"
    delays = [0.05 + 0.001 * i for i in range(20)]
    _records(rd, delays, lost={3, 11}, dup={5}, flows=(0, 2))
    flows, _ = load_flows(rd)
    assert [f.flow_id for f in flows] == [0, 2]
    for f in flows:
        want = np.array(delays)
        want[[3, 11]] = np.nan
        np.testing.assert_allclose(f.delay_s, want, rtol=0, atol=1e-9)
        assert f.duplicates == 1 and int(f.lost.sum()) == 2
    from_records = run_delays(rd)
    assert from_records.column_names == ["flow_id", "seq", "send_time_s", "delay_s"]
    np.testing.assert_array_equal(from_records["delay_s"].to_numpy(), np.concatenate([f.delay_s for f in flows]))
    assert from_records["send_time_s"].to_numpy()[0] == 0.0
    write_run_packets(rd)
    shutil.rmtree(rd / "sent")
    shutil.rmtree(rd / "received")
    from_file = run_delays(rd)
    for name in ("flow_id", "seq"):
        np.testing.assert_array_equal(from_file[name].to_numpy(), from_records[name].to_numpy())
    for name in ("send_time_s", "delay_s"):
        np.testing.assert_allclose(from_file[name].to_numpy(), from_records[name].to_numpy(), rtol=0, atol=1e-6)
    assert [f.duplicates for f in read_run_packets(rd).flows] == [1, 1]


# --- the one delays form ----------------------------------------------------------------------

def test_delays_round_trip_at_one_microsecond(tmp_path):
    d = np.array([0.0123456, np.nan, 0.2, 1.5])
    send = np.array([0.0, 0.02, np.nan, 0.06])
    path = write_delays(tmp_path / "d.parquet", np.array([0, 0, 1, 1]), d, seq=np.array([0, 1, 0, 1]),
                        send_time_s=send, keys={"cell_id": ["a", "a", "b", "b"], "seed": [1, 1, 2, 2]},
                        source="test")
    t = read_delays(path)
    assert t.column_names == ["cell_id", "seed", "flow_id", "seq", "send_time_s", "delay_s"]
    assert t["cell_id"].to_pylist() == ["a", "a", "b", "b"] and t["seq"].to_pylist() == [0, 1, 0, 1]
    np.testing.assert_array_equal(t["delay_s"].to_numpy(), np.round(d * 1e6) / 1e6)
    np.testing.assert_array_equal(t["send_time_s"].to_numpy(), send)
    meta = json.loads(pq.read_schema(path).metadata[b"tcpdelay.packets"])
    assert meta == {"kind": "delays", "source": "test", "format_version": FORMAT_VERSION}
    # one run's packets.parquet of kind delays is the same form (no keys)
    write_delays(tmp_path / layout.PACKETS_FILE, np.zeros(2), np.array([0.1, np.nan]), source="test")
    (flow,) = read_run_packets(tmp_path).flows
    assert flow.seq is None and np.isnan(flow.delay_s[1]) and flow.delay_s[0] == 0.1


def test_a_version_1_sweep_cache_reads_into_the_same_values(tmp_path):
    """The reproduction scripts' delays.parquet of format 1 (send time in ms, delay in µs, -1:
    never received) and the same values written in the one form read back bit for bit."""
    send_ms = np.array([0, 20, 40, 123456], np.int32)
    delay_us = np.array([50000, -1, 7, 2000000], np.int32)
    pq.write_table(pa.table({"cell_id": ["a"] * 4, "seed": pa.array([1] * 4, pa.int32()),
                             "flow_id": pa.array([0] * 4, pa.int32()), "send_time_ms": send_ms,
                             "delay_us": delay_us}), tmp_path / "v1.parquet")
    v1 = read_delays(tmp_path / "v1.parquet")
    d = np.where(delay_us < 0, np.nan, delay_us / 1e6)
    write_delays(tmp_path / "v2.parquet", np.zeros(4), d, send_time_s=send_ms / 1e3,
                 keys={"cell_id": ["a"] * 4, "seed": [1] * 4}, source="test")
    v2 = read_delays(tmp_path / "v2.parquet")
    for name in ("cell_id", "seed", "flow_id"):
        assert v1[name].to_pylist() == v2[name].to_pylist()
    for name in ("send_time_s", "delay_s"):
        np.testing.assert_array_equal(v1[name].to_numpy(), v2[name].to_numpy())
    with pytest.raises(ParameterError, match="is not a delays file"):
        pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")
        read_delays(tmp_path / "other.parquet")


@pytest.mark.slow  # rebuilds a committed sweep's delay cache (a few seconds)
def test_a_rebuilt_sweep_cache_has_the_committed_values(tmp_path):
    """results/droptail-5.3's delays.parquet (format 1, committed) and the cache rebuilt from its
    committed packets.parquet files through the one join and the one form: the same values."""
    from tcpdelay.reproductions.sweep_data import media_delays

    copy = tmp_path / "droptail-5.3"
    shutil.copytree(RESULTS / "droptail-5.3", copy)
    committed = media_delays(copy)  # the committed cache is newer than the runs' files
    (copy / layout.DELAYS_FILE).unlink()
    rebuilt = media_delays(copy)
    meta = json.loads(pq.read_schema(copy / layout.DELAYS_FILE).metadata[b"tcpdelay.packets"])
    assert meta["format_version"] == FORMAT_VERSION
    assert rebuilt.column_names == committed.column_names and rebuilt.num_rows == committed.num_rows
    for name in committed.column_names:
        a, b = committed[name].to_numpy(zero_copy_only=False), rebuilt[name].to_numpy(zero_copy_only=False)
        if a.dtype.kind == "f":
            np.testing.assert_array_equal(a, b, err_msg=name)
        else:
            assert a.tolist() == b.tolist(), name


# --- every committed result reads through the layer ---------------------------------------------

@pytest.mark.parametrize("name", SWEEPS)
def test_each_committed_result_is_found_and_has_its_version(name):
    """Results measured before format 2 are version 1 (their index says nothing); later ones say
    the version they were written in, and every run of a sweep is of its sweep's version."""
    found = layout.find_runs(RESULTS / name)
    assert found.kind == "sweep" and found.run_dirs()
    v = version_of(json.loads((RESULTS / name / layout.SWEEP_INDEX).read_text()), name)
    assert 1 <= v <= FORMAT_VERSION
    for _, rd in found.run_dirs():
        st = markers.read_status(rd)
        assert st.status == "complete", rd
        assert version_of(st.complete, str(rd)) == v
        stored = read_run_packets(rd)
        assert stored is not None or (rd / layout.METRICS_FILE).is_file(), rd
    if (RESULTS / name / layout.DELAYS_FILE).is_file():
        t = read_delays(RESULTS / name / layout.DELAYS_FILE)
        assert t.num_rows and set(t["cell_id"].to_pylist()) <= {c.id for c in found.cells}


@pytest.mark.slow  # measures every committed run again from its packets
# one group per result with the other file's loading of it (tests/results/conftest.py)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xdist_group(f"committed-{n}")) for n in SWEEPS])
def test_each_committed_result_loads(name, committed_results):
    res = committed_results(name)   # load_results, shared with test_results_walk's reopening
    runs = [r for c in res.cells for r in c.runs]
    assert runs and all(r.status == "complete" for r in runs), [(r.run_dir, r.error) for r in runs if r.error]
    # every run has its media flows, or (a run of pulled streams only) its streams' metrics, or
    # (cross traffic only: papers/004's FTP reference, papers/001's transfers) its flows' rows
    import pyarrow.parquet as pq

    def cross_only(run_dir):
        kinds = pq.read_table(run_dir / "flows.parquet", columns=["kind"]).column("kind").to_pylist()
        return bool(kinds) and "media" not in kinds
    assert all(r.flows or json.loads((r.run_dir / "metrics.json").read_text()).get("streams")
               or cross_only(r.run_dir) for r in runs)


def test_cell_index_masks_the_rows_of_each_cell_as_comparing_the_strings_does():
    import numpy as np
    import pyarrow as pa

    from tcpdelay.reproductions.sweep_data import CellIndex

    cells = ["c2", "c0", "c2", "c1", "c0", "c2"]
    table = pa.Table.from_batches([pa.record_batch({"cell_id": cells[:4]}), pa.record_batch({"cell_id": cells[4:]})])
    index = CellIndex(table)
    for cell in ("c0", "c1", "c2", "c9"):
        assert np.array_equal(index.mask(cell), np.asarray(cells) == cell), cell


def test_processes_asking_for_one_sweeps_delays_at_once_build_its_cache_once(tmp_path, monkeypatch):
    """A fresh clone's test workers and page scripts ask for the same sweeps together: one builds
    ``delays.parquet`` under the sweep's lock, the others wait and read it (each used to build it)."""
    import threading
    import time

    from tcpdelay.reproductions import sweep_data

    copy = tmp_path / "aqm-5.3-bytes-reduced"
    shutil.copytree(RESULTS / "aqm-5.3-bytes-reduced", copy)
    (copy / layout.DELAYS_FILE).unlink(missing_ok=True)
    built, real = [], sweep_data._build

    def slow_build(*args):
        built.append(threading.get_ident())
        time.sleep(0.3)          # long enough that every caller arrives while it builds
        real(*args)

    monkeypatch.setattr(sweep_data, "_build", slow_build)
    answers: list = []
    callers = [threading.Thread(target=lambda: answers.append(sweep_data.media_delays(copy))) for _ in range(3)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert len(built) == 1 and len(answers) == 3
    assert all(a.equals(answers[0]) for a in answers) and answers[0].num_rows > 0
    assert sweep_data.media_delays(copy).equals(answers[0]) and len(built) == 1   # fresh now: no rebuild
