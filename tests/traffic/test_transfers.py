"""Timed transfers (tcpdelay.traffic.transfers): the transfer timer against hand-built
timelines, papers/001's classes from known counters, the client/server join, and one short
exchange over loopback."""

from __future__ import annotations

import threading

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.plan import TRANSFER_PORT, plan_run
from tcpdelay.experiments.scenario import parse_scenario
from tcpdelay.traffic import transfers


def test_timer_ends_at_the_first_sample_with_every_byte_acknowledged():
    # 3 segments of 1000 bytes, RTT 100 ms, IW1: ACKs at 0.1 (1000), 0.2 (3000) seen by 1-ms polls
    times = [0.0, 0.001, 0.1, 0.101, 0.199, 0.2, 0.201]
    acked = [0, 0, 1000, 1000, 1000, 3000, 3000]
    assert transfers.transfer_done_s(times, acked, 3000) == 0.2
    assert transfers.transfer_done_s(times, acked, 1000) == 0.1
    assert transfers.transfer_done_s(times, acked, 3001) is None      # never fully acknowledged
    # an acknowledgement beyond the data (the FIN's sequence number) still ends it
    assert transfers.transfer_done_s([0.0, 0.3], [0, 3001], 3000) == 0.3
    with pytest.raises(ParameterError):
        transfers.transfer_done_s([0.2, 0.1], [0, 3000], 3000)        # samples out of order
    with pytest.raises(ParameterError):
        transfers.transfer_done_s([0.0], [0], 0)


def test_recovery_episodes_count_entries_not_samples():
    # open, disorder, recovery x3, open, recovery, loss, open
    assert transfers.recovery_episodes([0, 1, 3, 3, 3, 0, 3, 4, 0]) == 2
    assert transfers.recovery_episodes([3]) == 1
    assert transfers.recovery_episodes([0, 4, 4, 0]) == 0
    assert transfers.recovery_episodes([]) == 0


@pytest.mark.parametrize(("retx", "rtos", "cls"), [
    (0, 0, "no_loss"),
    (1, 0, "fast_retransmit"),
    (7, 0, "fast_retransmit"),
    (1, 1, "rto"),
    (5, 2, "rto"),
    (None, 0, None),
    (0, None, None),
])
def test_classes_from_known_counters(retx, rtos, cls):
    assert transfers.classify(retx, rtos) == cls


def test_negative_counters_are_refused():
    with pytest.raises(ParameterError):
        transfers.classify(-1, 0)


def test_merge_joins_by_the_clients_port_and_classes_each_row():
    client = [{"index": 0, "local_port": 5000, "open_s": 0.0, "handshake_s": 0.07, "done_s": 0.3, "bytes": 10,
               "syn_retransmits": 0, "complete": True},
              {"index": 1, "local_port": 5001, "open_s": 0.4, "handshake_s": 3.07, "done_s": 3.9, "bytes": 10,
               "syn_retransmits": 1, "complete": True},
              {"index": 2, "local_port": None, "open_s": 4.0, "handshake_s": None, "done_s": None, "bytes": 0,
               "syn_retransmits": None, "complete": False, "error": "connect: timed out"}]
    server = [{"peer_port": 5001, "size_bytes": 10, "bytes": 10, "transfer_s": 1.2, "retransmits": 2, "rtos": 1,
               "recoveries": 0, "synack_retransmits": 0, "mss_bytes": 1448, "complete": True},
              {"peer_port": 5000, "size_bytes": 10, "bytes": 10, "transfer_s": 0.07, "retransmits": 0, "rtos": 0,
               "recoveries": 0, "synack_retransmits": 0, "mss_bytes": 1448, "complete": True}]
    rows = transfers.merge(client, server)
    assert [r["transfer_s"] for r in rows] == [0.07, 1.2, None]
    assert [r["class"] for r in rows] == ["no_loss", "rto", None]
    assert [r["handshake_s"] for r in rows] == [0.07, 3.07, None]
    assert [r["complete"] for r in rows] == [True, True, False]


def test_scenario_plans_a_transfers_flow_on_its_own_port():
    sc = parse_scenario({"duration_s": 10, "path": {"rtt_s": 0.07},
                         "cross": [{"kind": "transfers", "size_bytes": 1448, "transfers": 5}]})
    (c,) = plan_run(sc, 1).cross
    assert (c.kind, c.transport, c.port) == ("transfers", "tcp", TRANSFER_PORT + c.flow_id)
    with pytest.raises(ParameterError, match="size_bytes"):
        parse_scenario({"duration_s": 10, "cross": [{"kind": "transfers", "size_bytes": 0}]})


def test_a_server_told_how_many_transfers_to_expect_ends_after_the_last_one():
    port = 47_127
    out: dict = {}
    # a limit no machine reaches: the server must end because the client's three are done
    server = threading.Thread(target=lambda: out.update(
        transfers.serve(port, duration_s=3600.0, host="127.0.0.1", expect=3)), daemon=True)
    server.start()
    got = transfers.client("127.0.0.1", port, size_bytes=50_000, transfers=3, gap_s=0.01, duration_s=60.0)
    server.join(timeout=120.0)
    assert not server.is_alive(), "the server kept listening after its client's last transfer"
    rows = transfers.merge(got["transfers"], out["transfers"])
    assert len(rows) == 3 and all(r["complete"] for r in rows), (got, out)
    with pytest.raises(ParameterError, match="expect"):
        transfers.serve(port, duration_s=1.0, expect=0)


def test_the_server_waits_for_a_request_longer_than_a_retransmitted_requests_backoff():
    """A request lost twice after a retransmitted SYN arrives 3 + 6 s after the handshake (RFC
    6298 §5.7's 3-s RTO, doubled): here the request comes 6 s after connecting."""
    import socket
    import time

    from tcpdelay.traffic.response_server import encode_request

    port = 47_129
    out: dict = {}
    server = threading.Thread(target=lambda: out.update(
        transfers.serve(port, duration_s=60.0, host="127.0.0.1", expect=1)), daemon=True)
    server.start()
    s = transfers.connect("127.0.0.1", port, deadline=time.monotonic() + 10)
    time.sleep(6.0)
    s.sendall(encode_request(10_000, None, transfers.WRITE_BYTES, None))
    got = b""
    s.settimeout(10.0)
    while len(got) < 10_000 and (chunk := s.recv(65536)):
        got += chunk
    s.close()
    server.join(timeout=30.0)
    assert len(got) == 10_000 and out["transfers"][0]["complete"], out


def test_loopback_transfers_are_timed_and_counted():
    port = 47_123
    out: dict = {}
    server = threading.Thread(target=lambda: out.update(transfers.serve(port, duration_s=4.0, host="127.0.0.1")))
    server.start()
    got = transfers.client("127.0.0.1", port, size_bytes=200_000, transfers=3, gap_s=0.01, duration_s=3.0)
    server.join()
    rows = transfers.merge(got["transfers"], out["transfers"])
    assert len(rows) == 3 and all(r["complete"] for r in rows), (got, out)
    for r in rows:
        assert r["bytes"] == 200_000 and r["class"] == "no_loss"
        assert 0 < r["handshake_s"] < 0.5 and 0 < r["transfer_s"] < 0.5


def test_a_window_clamp_holds_while_the_receive_buffer_would_grow():
    """Linux's receive-buffer autotuning raises the window clamp with the buffer ("make the
    window clamp follow along"), and an unlocked buffer starts below a large clamp: the client
    locks its buffer (SO_RCVBUF) at twice the clamp, so a long transfer sees exactly the clamp."""
    port = 47_141
    clamp = 128 * 548
    out: dict = {}
    server = threading.Thread(target=lambda: out.update(
        transfers.serve(port, duration_s=10.0, host="127.0.0.1", mss_bytes=536, expect=2)))
    server.start()
    got = transfers.client("127.0.0.1", port, size_bytes=4_000_000, transfers=2, gap_s=0.01, duration_s=8.0,
                           mss_bytes=536, window_clamp_bytes=clamp)
    server.join()
    rows = transfers.merge(got["transfers"], out["transfers"])
    assert len(rows) == 2 and all(r["complete"] for r in rows), (got, out)
    for r in rows:
        assert r["window_clamp_bytes"] == clamp and r["peer_window_max_bytes"] == clamp, r


def test_a_window_clamp_holds_past_the_first_segment_above_536_bytes():
    """Linux replaces a TCP_WINDOW_CLAMP with what the receive buffer holds when the first data
    segment longer than 536 bytes (its initial receive-MSS estimate) arrives
    (tcp_measure_rcv_mss), locked buffer or not: with MSS 1448 and 4312 the clamp was lost (8
    segments of 4312 advertised 15, then the whole buffer). The client sets it again after its
    first read: at the end of each transfer the clamp reads back as set and the client's last
    window is W whole segments."""
    port = 47_151
    w = 8
    for mss in (1448, 4312):
        clamp = w * (mss + 12)
        out: dict = {}
        server = threading.Thread(target=lambda: out.update(
            transfers.serve(port, duration_s=10.0, host="127.0.0.1", mss_bytes=mss, expect=2)))
        server.start()
        got = transfers.client("127.0.0.1", port, size_bytes=256 * mss, transfers=2, gap_s=0.01, duration_s=8.0,
                               mss_bytes=mss, window_clamp_bytes=clamp)
        server.join()
        rows = transfers.merge(got["transfers"], out["transfers"])
        assert len(rows) == 2 and all(r["complete"] for r in rows), (got, out)
        for r in rows:
            assert r["mss_bytes"] == mss and r["window_clamp_bytes"] == clamp, r
            assert w * mss <= r["peer_window_last_bytes"] <= clamp, r
        port += 1


def test_loopback_transfers_take_the_mss_and_the_window_clamp():
    """TCP_MAXSEG (mss_bytes + the 12-byte timestamp option) on both sockets gives segments of
    mss_bytes (tcpi_snd_mss); TCP_WINDOW_CLAMP on the client reads back and bounds the window the
    server saw (tcpi_snd_wnd). Linux rounds that window down to its receive MSS (536 + 12): 8 x 548
    bytes advertise 8 segments, 8 x 536 only 7 (scenario.Tcp.window_clamp_bytes)."""
    port = 47_131
    for clamp, advertised in ((8 * 548, 8 * 548), (8 * 536, 7 * 548)):
        out: dict = {}
        server = threading.Thread(target=lambda: out.update(
            transfers.serve(port, duration_s=3.0, host="127.0.0.1", mss_bytes=536)))
        server.start()
        got = transfers.client("127.0.0.1", port, size_bytes=64 * 536, transfers=2, gap_s=0.01, duration_s=2.0,
                               mss_bytes=536, window_clamp_bytes=clamp)
        server.join()
        rows = transfers.merge(got["transfers"], out["transfers"])
        assert len(rows) == 2 and all(r["complete"] for r in rows), (got, out)
        for r in rows:
            assert r["mss_bytes"] == 536 and r["window_clamp_bytes"] == clamp, r
            assert r["peer_window_max_bytes"] == advertised, r
        port += 1


def test_the_server_samples_each_transfers_tcp_state_into_records(tmp_path):
    """With tcp_state_dir and a period the server writes each transfer's TCP_INFO over time as
    tcp_state records (the sender's window, as ns-3's probe records it): the flow id it is
    given, one connection number per transfer in order, and a window that is there."""
    from tcpdelay.records import read_records

    port = 47_161
    out: dict = {}
    server = threading.Thread(target=lambda: out.update(transfers.serve(
        port, duration_s=10.0, host="127.0.0.1", expect=2, tcp_state_dir=str(tmp_path),
        tcp_state_period_s=0.0005, flow_id=7)))
    server.start()
    got = transfers.client("127.0.0.1", port, size_bytes=30_000_000, transfers=2, gap_s=0.01, duration_s=8.0)
    server.join()
    assert got["complete"] and len(out["transfers"]) == 2, (got, out)
    recs = read_records(tmp_path, "tcp_state").to_pydict()
    assert set(recs["flow_id"]) == {7}
    assert set(recs["connection"]) == {0, 1}
    assert min(recs["cwnd_segments"]) > 0
    for c in (0, 1):   # in time order within a transfer
        times = [t for t, k in zip(recs["time_s"], recs["connection"]) if k == c]
        assert len(times) >= 2 and times == sorted(times)
