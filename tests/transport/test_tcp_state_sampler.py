"""TCP state over time: the media sender samples TCP_INFO into tcp_state records (loopback)."""

import threading

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.records import read_records
from tcpdelay.traffic import CbrSource
from tcpdelay.transport import ReceiverConfig, RunParams, SenderConfig, run_receiver, run_sender


def _receiver():
    cfg = ReceiverConfig(listen_host="127.0.0.1", idle_timeout_s=5.0)
    ready, box = threading.Event(), {}

    def main():
        box["results"] = run_receiver(cfg, on_ready=lambda a: (box.update(port=a[1]), ready.set()))

    t = threading.Thread(target=main, daemon=True)
    t.start()
    assert ready.wait(10)
    return t, box["port"]


def _run(tmp_path, **kw):
    thread, port = _receiver()
    cfg = SenderConfig("127.0.0.1", port, run=RunParams(duration_s=1.0, connections=2),
                       out_dir=str(tmp_path), **kw)
    res = run_sender(cfg, CbrSource(1000, 0.002))
    thread.join(20)
    assert res.status == "completed"
    return read_records(tmp_path, "tcp_state")


def test_each_connection_is_sampled_at_the_period(tmp_path):
    t = _run(tmp_path, tcp_state_period_s=0.01)
    conn = t.column("connection").to_numpy()
    assert set(conn) == {0, 1}
    for c in (0, 1):
        rows = t.filter(t.column("connection").to_numpy() == c)
        times = rows.column("time_s").to_numpy()
        assert np.all(np.diff(times) > 0)
        gaps = np.diff(times)
        assert 0.008 < np.median(gaps) < 0.015, np.median(gaps)
        assert 70 <= len(times) <= 130       # a 1 s run at 10 ms
        assert np.all(rows.column("cwnd_segments").to_numpy() > 0)
        assert rows.column("srtt_s").to_numpy()[-1] > 0
        assert rows.column("mss_bytes").to_numpy()[-1] > 0
        acked = rows.column("bytes_acked").to_numpy()
        assert np.all(np.diff(acked) >= 0) and acked[-1] > 0
        assert rows.column("cc_state_0").null_count == len(rows)   # not a tcpdelay BPF variant


def test_a_period_of_zero_writes_no_tcp_state(tmp_path):
    assert _run(tmp_path, tcp_state_period_s=0).num_rows == 0


@pytest.mark.parametrize("kw", [{"tcp_state_period_s": -0.01}, {"tcp_state_period_s": 61},
                                {"cc_state_map_id": 0}, {"cc_state_map_id": "3"}])
def test_bad_sampling_settings_are_parameter_errors(kw):
    with pytest.raises(ParameterError, match=next(iter(kw))):
        SenderConfig("127.0.0.1", 9, **kw)
