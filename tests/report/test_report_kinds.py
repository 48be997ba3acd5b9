"""``tcpdelay report`` shows what every kind of run measured (issue 27, defect 2): timed
transfers (their handshake and transfer times, papers/001's result), pulled streams (a figure,
no empty media tables), cross traffic, the bottleneck queue, TCP state; a directory of mixed
kinds shows each kind. Read from the committed results, reports written to a temporary folder."""

import html as html_text
import json
import re
from pathlib import Path

import pytest

from tcpdelay.report.html import Report
from tcpdelay.report.results import build_report, write_report
from tcpdelay.results import load_results
from tcpdelay.results.run_measures import read_run_measures

RESULTS = Path(__file__).resolve().parents[2] / "results"


def _tables(html: str) -> list[tuple[list[str], int]]:
    """(headers, rows) of every table of a page."""
    out = []
    for t in re.findall(r"<table>(.*?)</table>", html, flags=re.S):
        out.append((re.findall(r"<th>([^<]*)</th>", t), t.count("<tr>") - 1))
    return out


def test_transfers_show_their_handshake_and_transfer_times(tmp_path):
    src = RESULTS / "latency-cardwell-fig3"
    doc = write_report(src, tmp_path / "r.html")
    html = html_text.unescape((tmp_path / "r.html").read_text())
    assert doc["measured"][0] == "transfers"
    (cell,) = doc["transfers"]
    # the run's own rows, pooled: 1000 handshakes made, the statistics over the completed ones
    (run,) = [r for r in (src / "cells").glob("*/seed-*") if (r / "complete.json").is_file()]
    rows = read_run_measures(run).transfers[0].rows
    done = [t["handshake_s"] for t in rows if t["complete"] and t["handshake_s"] is not None]
    assert cell["transfers"] == len(rows) == 1000 and cell["complete"] == sum(t["complete"] for t in rows)
    assert cell["handshake_s"]["mean_s"] == pytest.approx(sum(done) / len(done))
    assert cell["transfer_s"]["count"] > 0
    assert "Transfers (every run's transfers pooled per cell)" in html
    headers = [h for h, n in _tables(html) if n > 0]
    assert any("handshake mean ms" in h and "transfer mean ms" in h for h in headers)
    assert [p["title"] for p in doc["plots"]][:2] == ["Transfers: handshake time", "Transfers: transfer time"]
    # no empty media tables for a run without media flows
    assert all(n > 0 for _, n in _tables(html)) and "Media flows" not in html


def test_pulled_streams_get_a_figure_and_no_empty_tables(tmp_path):
    doc = write_report(RESULTS / "video-tcp-variants-5a-reduced", tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert doc["measured"] == ["streams"] and len(doc["streams"]) == 6
    assert [p["title"] for p in doc["plots"]] == ["Pulled stream: discards and stalls"]
    assert "No figure of the metrics shown" not in html
    assert _tables(html) and all(n > 0 for _, n in _tables(html))


def test_cross_traffic_and_queue_of_a_run_without_media(tmp_path):
    doc = write_report(RESULTS / "mpeg4-4.1-wired-ftp-reduced-ns3", tmp_path / "r.html")
    assert doc["measured"] == ["cross_traffic", "queue"]
    assert {c["kind"] for c in doc["cross_traffic"]} == {"bulk"}
    assert all(c["goodput_bps"]["mean"] > 0 for c in doc["cross_traffic"])
    busy = [q for q in doc["queue"] if q["max_packets"]]
    assert busy and all(q["mean_packets"] is not None for q in busy)
    titles = [p["title"] for p in doc["plots"]]
    assert titles == ["Cross traffic goodput", "Bottleneck queue length"]


def test_a_directory_of_mixed_kinds_shows_each_kind():
    """Audio (a media flow) beside page loads (cross traffic): both sections, with the page's
    load time, and the senders' TCP at the runs' end."""
    rep = Report("x")
    doc = build_report(load_results(RESULTS / "hspa-audio-web"), rep)
    assert doc["measured"] == ["media", "cross_traffic", "tcp_state"]
    assert doc["cells"][0]["flows"] and doc["cells"][0]["flows"][0]["name"] == "audio"
    loads = [c for c in doc["cross_traffic"] if c["kind"] == "page_load"]
    assert loads and all(c["page_load_time_s"]["mean"] > 0 for c in loads)
    assert doc["tcp"]["end"]
    titles = {s.title for s in rep.sections}
    assert {"Media flows: per run", "Cross traffic (means over the complete runs)", "TCP state"} <= titles


def test_a_damaged_metrics_file_is_named_and_the_rest_reported(tmp_path):
    import shutil

    src = RESULTS / "video-tcp-variants-5a-reduced"
    shutil.copytree(src, tmp_path / "v", ignore=shutil.ignore_patterns("*.parquet"))
    runs = sorted((tmp_path / "v" / "cells").glob("*/seed-*"))
    (runs[0] / "metrics.json").write_text("[]")
    (runs[1] / "metrics.json").write_text("garbage")
    doc = write_report(tmp_path / "v", tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert sum(s["runs"] for s in doc["streams"]) == 18 - 2
    assert str(runs[0] / "metrics.json") in html and str(runs[1] / "metrics.json") in html
    json.dumps(doc)  # the JSON stays JSON


def test_tcp_state_over_time_from_the_records_the_sweep_kept(tmp_path):
    """A committed sweep keeps its runs' TCP state in tcp_state.parquet (the record parts stay
    out): the window over time of each cell is drawn from it, one curve per connection."""
    doc = write_report(RESULTS / "latency-cardwell-lossfree-state", tmp_path / "r.html")
    assert "tcp_state" in doc["measured"]
    state = doc["tcp"]["state"]
    assert len(state) == 2 and all(s["connections"] == 2 for s in state)
    titles = [p["title"] for p in doc["plots"] if p["section"] == "TCP state"]
    assert titles == [f"TCP window: {s['short_label']}" for s in state]


def test_a_queue_trace_is_tabled_and_drawn(tmp_path, make_run):
    """A run that kept its link_queue records (the ns-3 backend writes them): the queue's mean and
    peak per direction in the table, its length over time in a figure; an empty direction is a note."""
    from tcpdelay.records import RecordWriter

    run = tmp_path / "r" / "seed-1"
    make_run(run, [0.03] * 50)
    with RecordWriter(run, "link_queue", writer_id="q") as w:
        for k in range(100):
            w.append(direction="a_to_b", time_s=5.0 + 0.01 * k, packets=k % 20, bytes=1500 * (k % 20))
            w.append(direction="b_to_a", time_s=5.0 + 0.01 * k, packets=0, bytes=0)
    (run / "metrics.json").write_text(json.dumps({"flows": [], "queue": {
        "a_to_b": {"mean_packets": 9.5, "max_packets": 19, "mean_bytes": 14250.0, "max_bytes": 28500, "samples": 100},
        "b_to_a": {"mean_packets": 0.0, "max_packets": 0, "mean_bytes": 0.0, "max_bytes": 0, "samples": 100}}}))
    doc = write_report(tmp_path / "r", tmp_path / "r.html")
    html = html_text.unescape((tmp_path / "r.html").read_text())
    assert "queue" in doc["measured"]
    busy = [q for q in doc["queue"] if q["max_packets"]]
    assert [(q["direction"], q["mean_packets"], q["max_packets"]) for q in busy] == [("a_to_b", 9.5, 19)]
    assert "The queue stayed empty in every run (b_to_a; 100 samples)" in html
    titles = [p["title"] for p in doc["plots"] if p["section"] == "Bottleneck queue"]
    assert titles == ["Bottleneck queue length", "Bottleneck queue over time"]
