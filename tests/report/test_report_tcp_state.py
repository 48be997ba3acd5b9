"""TCP state over time in the report: a run with tcp_state records gets its time-series figure;
a run without them renders exactly as before."""

import json

import numpy as np

from tcpdelay.records import RecordWriter
from tcpdelay.report.results import write_report
from tcpdelay.results.tcp_state import tcp_state, tcp_state_series


def _write_tcp_state(run_dir, flows=((0, 0), (0, 1), (5, 0)), n=50):
    with RecordWriter(run_dir, "tcp_state", writer_id="test") as w:
        for fid, conn in flows:
            for k in range(n):
                w.append(flow_id=fid, connection=conn, time_s=1000.0 + 0.01 * k, cwnd_segments=10 + k,
                         ssthresh_segments=None, srtt_s=0.05 + 0.001 * k, rttvar_s=0.01,
                         delivery_rate_bps=None if k == 0 else 1e6 * (1 + fid), retransmits_total=0,
                         ca_state=0, bytes_acked=1448 * k, mss_bytes=1448, pacing_rate_bps=2e6,
                         cc_state_0=None, cc_state_1=None, cc_state_2=None, cc_state_3=None)


def test_the_reader_gives_one_series_per_connection(tmp_path):
    assert tcp_state(tmp_path) is None and tcp_state_series(tmp_path) == []
    _write_tcp_state(tmp_path)
    series = tcp_state_series(tmp_path)
    assert [(s.flow_id, s.connection) for s in series] == [(0, 0), (0, 1), (5, 0)]
    s = series[2]
    assert s.t_s[0] == 0 and np.allclose(np.diff(s.t_s), 0.01)
    assert s.cwnd_segments[-1] == 59 and s.srtt_s[0] == 0.05
    assert np.isnan(s.delivery_rate_bps[0]) and s.delivery_rate_bps[1] == 6e6


def test_a_run_with_tcp_state_records_gets_the_time_series_figure(tmp_path, make_run):
    make_run(tmp_path / "old" / "seed-1", [0.03] * 50)
    before = write_report(tmp_path / "old", tmp_path / "before.html")
    html_before = (tmp_path / "before.html").read_text()
    assert "TCP state over time" not in html_before

    make_run(tmp_path / "new" / "seed-1", [0.03] * 50)
    _write_tcp_state(tmp_path / "new" / "seed-1")
    after = write_report(tmp_path / "new", tmp_path / "after.html")
    html = (tmp_path / "after.html").read_text()
    assert after["figures"] == before["figures"] + 1
    assert html.count("<figure") == html_before.count("<figure") + 1
    assert "<figcaption>TCP state over time of" in html


def test_an_old_run_renders_exactly_as_before(tmp_path, make_run):
    make_run(tmp_path / "r" / "seed-1", [0.03] * 50)
    a = write_report(tmp_path / "r", tmp_path / "a.html")
    (tmp_path / "r" / "seed-1" / "tcp_state").mkdir()        # an empty dataset: still no records
    b = write_report(tmp_path / "r", tmp_path / "b.html")
    assert json.dumps(a, sort_keys=True).replace("a.html", "b.html") == json.dumps(b, sort_keys=True)
    assert (tmp_path / "a.html").read_text() == (tmp_path / "b.html").read_text()
