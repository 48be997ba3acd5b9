"""``tcpdelay report`` on runs of pulled streams (papers/003's video over HTTP): the runs are
complete without media packet records, and the report's stream table gives each measure's mean ±
std over the runs, from their metrics.json (what a fresh clone has)."""

import json

import pytest

from tcpdelay.records import write_run_metadata
from tcpdelay.report.results import write_report


def _stream_run(run_dir, discards, underflows, retrans):
    run_dir.mkdir(parents=True)
    write_run_metadata(run_dir, {"clock": "shared-monotonic", "duration_s": 90.0,
                                 "run": {"streams": [{"flow_id": 0, "player_kind": "model"}]}})
    (run_dir / "metrics.json").write_text(json.dumps({"flows": [], "streams": [
        {"flow_id": 0, "player": "model", "picture_discards": discards, "underflow_events": underflows,
         "underflow_s": underflows * 0.4, "retransmits": retrans, "startup_s": 0.9}]}))
    (run_dir / "complete.json").write_text(json.dumps({"seed": 1, "wall_s": 95.0, "summary": {}}))


def test_stream_runs_are_complete_and_tabled(tmp_path):
    _stream_run(tmp_path / "r" / "seed-1", 3, 11, 150)
    _stream_run(tmp_path / "r" / "seed-2", 5, 9, 170)
    data = write_report(tmp_path / "r", tmp_path / "r.html")
    assert data["runs"]["complete"] == 2 and data["runs"]["failed"] == 0
    (st,) = data["streams"]
    assert st["runs"] == 2 and st["player"] == "model"
    assert st["picture_discards"] == {"mean": 4.0, "std": pytest.approx(2 ** 0.5)}
    assert st["underflow_events"]["mean"] == 10.0 and st["retransmits"]["mean"] == 160.0
    html = (tmp_path / "r.html").read_text()
    assert "Pulled streams (mean ± std over runs)" in html and "4 ± 1.4" in html


def test_runs_without_streams_have_no_stream_section(tmp_path, make_run):
    make_run(tmp_path / "r" / "seed-1", [0.03] * 50)
    data = write_report(tmp_path / "r", tmp_path / "r.html")
    assert "streams" not in data and "Pulled streams" not in (tmp_path / "r.html").read_text()
