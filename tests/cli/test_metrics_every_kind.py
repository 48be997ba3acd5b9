"""``tcpdelay metrics`` on every kind of committed run (issue 27, defects 1, 8 and 10): runs of
timed transfers, pulled streams and cross traffic alone show what they measured; runs that keep
only their packets' delays (``packets.parquet`` of kind ``delays``) are read from it and from
their ``metrics.json``, and say which; flows are named as the scenario names them (as ``report``
does); a sub-millisecond jitter is not "0.0 ms"; a damaged ``flows.parquet`` is said, not
ignored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tcpdelay.cli import main
from tcpdelay.cli.common import fmt_s
from tcpdelay.records import RecordWriter, write_run_metadata
from tcpdelay.results.load import load_results

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
TRANSFERS = RESULTS / "latency-cardwell-fig3/cells/4bfe8d3852f4/seed-1"
STREAMS = RESULTS / "video-tcp-variants-5a-reduced/cells/2b73878791ed/seed-1"
FTP_ONLY = RESULTS / "mpeg4-4.1-wired-ftp-reduced/cells/d1193d7c1912/seed-1"
DELAYS_AND_METRICS = RESULTS / "droptail-5.3/cells/0ab94cb8bca7/seed-1"
DELAYS_ONLY = RESULTS / "validate-wide/cells/05cc388f8c3b/seed-1"
AUDIO = RESULTS / "hspa-audio-bulk/cells/21073b843776/seed-1"


def _run(capsys, *args) -> tuple[int, str, str]:
    try:
        main(["metrics", *map(str, args)])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys, *args) -> dict:
    code, out, err = _run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


def test_a_run_of_timed_transfers_shows_its_handshake_and_transfer_times(capsys):
    doc = _json(capsys, TRANSFERS)
    rows = json.loads((TRANSFERS / "run.json").read_text())["run"]["cross"][0]["result"]["transfers"]
    done = [r for r in rows if r["complete"]]
    (t,) = doc["transfers"]
    assert (t["name"], t["transfers"], t["complete"]) == ("cross0-transfers", len(rows), len(done))
    assert t["handshake_s"]["count"] == len(done)
    assert t["handshake_s"]["mean_s"] == pytest.approx(sum(r["handshake_s"] for r in done) / len(done))
    assert t["transfer_s"]["max_s"] == pytest.approx(max(r["transfer_s"] for r in done))
    assert t["retransmits"] == sum(r["retransmits"] for r in rows if r["retransmits"] is not None)
    assert doc["flows"] == [] and doc["sources"]["transfers"] == "run.json"
    code, out, err = _run(capsys, TRANSFERS)
    assert code == 0 and "Timed transfers of cross0-transfers" in out and "handshake" in out, err


def test_a_run_of_pulled_streams_shows_the_player(capsys):
    doc = _json(capsys, STREAMS)
    stored = json.loads((STREAMS / "metrics.json").read_text())["streams"][0]
    (st,) = doc["streams"]
    assert st["name"] == "video" and st["picture_discards"] == stored["picture_discards"]
    assert st["underflow_events"] == stored["underflow_events"]
    assert doc["sources"]["streams"].startswith("metrics.json")
    code, out, _ = _run(capsys, STREAMS)
    assert code == 0 and "Pulled streams" in out and "underflows" in out


def test_a_run_of_cross_traffic_alone_shows_its_flows_and_queue(capsys):
    doc = _json(capsys, FTP_ONLY)
    rows = pq.read_table(FTP_ONLY / "flows.parquet").to_pylist()
    assert [c["name"] for c in doc["cross"]] == [r["name"] for r in rows]
    assert doc["queue"] == json.loads((FTP_ONLY / "metrics.json").read_text())["queue"]
    code, out, _ = _run(capsys, FTP_ONLY)
    assert code == 0 and "Cross traffic" in out and "Bottleneck queue" in out and "cross0-bulk" in out


def test_a_delays_run_is_read_from_its_metrics_json_and_says_so(capsys):
    doc = _json(capsys, DELAYS_AND_METRICS)
    stored = json.loads((DELAYS_AND_METRICS / "metrics.json").read_text())
    assert [f["delay"]["mean_s"] for f in doc["flows"]] == pytest.approx([f["delay"]["mean_s"] for f in stored["flows"]])
    assert doc["sources"]["flows"].startswith("metrics.json") and "packets.parquet" in doc["sources"]["flows"]
    code, out, err = _run(capsys, DELAYS_AND_METRICS)
    assert code == 0 and "flows: from metrics.json" in out and "sent/" not in err


def test_options_a_stored_metrics_json_was_not_computed_with_are_said(capsys):
    doc = _json(capsys, DELAYS_AND_METRICS, "--playout-delay-s", "0.2")
    assert any("--playout-delay-s" in w for w in doc["warnings"])
    assert doc["options"]["playout_delays_s"] == json.loads(
        (DELAYS_AND_METRICS / "metrics.json").read_text())["options"]["playout_delays_s"]


def test_a_run_with_only_its_delays_is_measured_from_them(capsys):
    doc = _json(capsys, DELAYS_ONLY, "--playout-delay-s", "0.1", "--playout-delay-s", "0.2")
    measured = json.loads((DELAYS_ONLY / "complete.json").read_text())["summary"]["measured"]
    (f,) = doc["flows"]
    assert doc["sources"]["flows"].startswith("packets.parquet (kind delays)")
    assert f["packets"]["packets"] == measured["packets"] and f["packets"]["received"] == measured["received"]
    assert f["delay"]["mean_s"] == pytest.approx(measured["mean_s"], abs=1e-6)   # kept at 1 µs
    assert f["delay"]["p95_s"] == pytest.approx(measured["p95_s"], abs=1e-6)
    assert f["late"]["late_fraction"] == pytest.approx([measured["late_fraction"]["0.1"],
                                                         measured["late_fraction"]["0.2"]])
    code, out, _ = _run(capsys, DELAYS_ONLY)
    assert code == 0 and "One-way delay" in out


def test_flows_are_named_as_the_scenario_names_them(capsys):
    doc = _json(capsys, DELAYS_AND_METRICS)
    names = {r["flow_id"]: r["name"] for r in pq.read_table(DELAYS_AND_METRICS / "flows.parquet").to_pylist()}
    assert [f["name"] for f in doc["flows"]] == [names[f["flow_id"]] for f in doc["flows"]] == \
        [f"voip#{i}" for i in range(5)]
    report_names = {(f.flow_id, f.name) for c in load_results(DELAYS_AND_METRICS).cells for r in c.runs
                    for f in r.flows}
    assert report_names == {(f["flow_id"], f["name"]) for f in doc["flows"]}   # as report names them
    code, out, _ = _run(capsys, DELAYS_AND_METRICS)
    assert code == 0 and "voip#0" in out


def test_sub_millisecond_values_keep_their_digits(capsys):
    assert fmt_s(11.6e-6) == "11.6 µs" and fmt_s(3.43e-9) == "3.43 ns" and fmt_s(0.0123) == "12.3 ms"
    assert fmt_s(0.0) == "0.0 ms" and fmt_s(2.5) == "2.500 s" and fmt_s(0.99996e-3) == "1.0 ms"
    doc = _json(capsys, AUDIO)
    jitter = doc["flows"][0]["jitter_rfc3550_s"]
    assert jitter < 1e-4
    code, out, _ = _run(capsys, AUDIO)
    assert code == 0 and fmt_s(jitter) in out and fmt_s(jitter).endswith("µs")


@pytest.fixture
def recorded_run(tmp_path):
    """A run with its records (one flow "voip" of 20 packets) and a flows.parquet."""
    with RecordWriter(tmp_path, "sent", writer_id="s") as ws, RecordWriter(tmp_path, "received", writer_id="r") as wr:
        for seq in range(20):
            t = seq * 0.02
            ws.append(flow_id=0, connection=0, seq=seq, size_bytes=172, send_time_s=t, frame_id=-1, frame_type="",
                      frame_last=True, dropped=False)
            wr.append(flow_id=0, connection=0, seq=seq, size_bytes=172, send_time_s=t, recv_time_s=t + 0.05)
    write_run_metadata(tmp_path, {"clock": "shared", "duration_s": 0.4})
    shutil.copy(DELAYS_AND_METRICS / "flows.parquet", tmp_path / "flows.parquet")
    return tmp_path


def test_an_unreadable_flows_parquet_is_said(capsys, monkeypatch, recorded_run):
    # wide enough that the warning's path is not folded (an xdist worker's tmp path is long)
    monkeypatch.setenv("COLUMNS", "400")
    assert _json(capsys, recorded_run)["flows"][0]["name"] == "voip#0"
    whole = (recorded_run / "flows.parquet").read_bytes()
    (recorded_run / "flows.parquet").write_bytes(whole[: len(whole) // 2])   # a write cut short
    doc = _json(capsys, recorded_run)
    assert doc["flows"][0]["packets"]["received"] == 20          # the records still give the metrics
    assert any("flows.parquet" in w and "cannot be read" in w for w in doc["warnings"])
    code, out, _ = _run(capsys, recorded_run)
    assert code == 0 and "warning:" in out and "flows.parquet" in out


def test_a_sweep_directory_is_one_line_pointing_at_a_run(capsys):
    code, out, err = _run(capsys, DELAYS_AND_METRICS.parents[2])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "holds 15 runs" in lines[0] and "seed-1" in lines[0], err


@pytest.mark.parametrize("run", [DELAYS_AND_METRICS, TRANSFERS, STREAMS, FTP_ONLY],
                         ids=["five-voice-flows", "transfers", "streams", "ftp"])
def test_the_tables_fit_80_columns_uncut(capsys, monkeypatch, run):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = _run(capsys, run)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out, out        # no header or number cut short
