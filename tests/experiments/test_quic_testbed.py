"""QUIC flows on the testbed beside TCP: a scenario with the three mappings through the emulator
at 2 % loss and RTT 100 ms. Head-of-line blocking: a frame stream's later packets are not held
behind an earlier loss (they arrive before it), while one QUIC stream and TCP deliver strictly
in order and release a burst at once when the loss is repaired."""

from __future__ import annotations

import numpy as np
import pytest

from tcpdelay.experiments.scenario import parse_scenario


def _testbed_unavailable() -> str | None:
    from tcpdelay.testbed.netns import unavailable_reason

    return unavailable_reason()


SCENARIO = {
    "name": "quic-hol", "duration_s": 10, "seed": 3, "metrics": ["delay", "late", "loss"],
    "path": {"rtt_s": 0.1, "loss": {"model": "bernoulli", "p": 0.02}},
    "flows": [
        {"name": "tcp", "profile": "voip", "transport": "tcp", "tcp": {"preset": "linux-default"}},
        {"name": "stream", "profile": "voip", "transport": "quic-stream"},
        {"name": "frames", "profile": "voip", "transport": "quic-frame-streams"},
        {"name": "datagrams", "profile": "voip", "transport": "quic-datagram",
         "quic": {"congestion_control": "cubic"}},
    ],
}


def _by_flow(run_dir, flow_id):
    from tcpdelay.records import read_records

    t = read_records(run_dir, "received")
    keep = t.column("flow_id").to_numpy() == flow_id
    seq = t.column("seq").to_numpy()[keep]
    recv = t.column("recv_time_s").to_numpy()[keep]
    order = np.argsort(seq)
    return seq[order], recv[order]


@pytest.mark.skipif(_testbed_unavailable() is not None, reason=f"needs the testbed: {_testbed_unavailable()}")
@pytest.mark.testbed
def test_frame_streams_have_no_head_of_line_blocking_where_one_stream_and_tcp_do(tmp_path):
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.records import read_records

    sc = parse_scenario(SCENARIO, source="quic-hol")
    totals = run_scenario(sc, 3, tmp_path)
    assert totals["errors"] == [] and "metrics_error" not in totals
    sent = read_records(tmp_path, "sent")
    n = {f: int((sent.column("flow_id").to_numpy() == f).sum()) for f in range(4)}
    assert all(v == 500 for v in n.values()), n
    for flow in (0, 1, 2):               # reliable: every packet arrives
        seq, _ = _by_flow(tmp_path, flow)
        assert len(seq) == 500, flow
    seq, _ = _by_flow(tmp_path, 3)       # datagrams: some lost on the way, none twice
    assert 400 < len(seq) < 500 and len(set(seq)) == len(seq)
    # Strictly in order (TCP, one QUIC stream): receive times never go backwards in sequence
    # order, and a repaired loss releases the packets held behind it together (3 or more
    # packets sent 20 ms apart, read within 1 ms).
    for flow in (0, 1):
        _, recv = _by_flow(tmp_path, flow)
        assert (np.diff(recv) >= 0).all(), flow
        together = np.diff(recv) < 0.001
        assert any(together[i] and together[i + 1] for i in range(len(together) - 1)), flow
    # A stream per frame: a later frame is read before an earlier lost one is repaired.
    _, recv = _by_flow(tmp_path, 2)
    assert (np.diff(recv) < 0).any()
    for flow in (1, 2, 3):               # QUIC's state over time, per flow
        st = read_records(tmp_path / "flows" / str(flow), "quic_state")
        assert st.num_rows > 100 and max(st.column("lost_packets_total").to_pylist()) > 0
