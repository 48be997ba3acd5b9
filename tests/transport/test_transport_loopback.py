"""Sender and receiver end to end over loopback (127.0.0.1): every mode, every ending."""

import socket
import struct
import threading
import time

import numpy as np
import pytest

from tcpdelay.records import read_records, read_run_metadata
from tcpdelay.traffic import CbrSource, VoipOnOffSource
from tcpdelay.transport import (
    ReceiverConfig, RunParams, SenderConfig, SenderError, TcpOptions, run_receiver, run_sender,
)
from tcpdelay.transport import control
from tcpdelay.transport.framing import MIN_MEDIA_RTP_BYTES, encode_media, frame


class Receiver:
    """run_receiver in a thread, on a free loopback port."""

    def __init__(self, **kw):
        kw.setdefault("listen_host", "127.0.0.1")
        kw.setdefault("idle_timeout_s", 5.0)
        self.cfg = ReceiverConfig(**kw)
        self.stop = threading.Event()
        self.results = []
        self.error = None
        ready = threading.Event()

        def main():
            try:
                self.results = run_receiver(self.cfg, stop=self.stop,
                                            on_ready=lambda a: (setattr(self, "port", a[1]), ready.set()))
            except BaseException as err:  # noqa: BLE001 - reported by join()
                self.error = err
                ready.set()

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        assert ready.wait(10)
        assert self.error is None, self.error

    def join(self, timeout=20):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "receiver did not finish"
        assert self.error is None, self.error
        return self.results


def send(rx: Receiver, source, out_dir=None, **kw):
    run = RunParams(**{k: kw.pop(k) for k in list(kw) if k in RunParams.__dataclass_fields__})
    return run_sender(SenderConfig("127.0.0.1", rx.port, run=run, out_dir=out_dir, **kw), source)


def delays(run_dir):
    t = read_records(run_dir, "received")
    return t, t.column("recv_time_s").to_numpy() - t.column("send_time_s").to_numpy()


VOIP = CbrSource(172, 0.02)


def _hello(ctl: socket.socket, run_id: str, **params) -> dict:
    """A hand-driven sender's hello on its control connection; the receiver's accept."""
    control.send(ctl, {"type": "hello", "protocol": control.PROTOCOL, "version": control.VERSION,
                       "run_id": run_id, "params": RunParams(**params).to_dict()},
                 pad_to=control.REQUEST_PAD_BYTES)
    accept, _ = control.recv(ctl, 5)
    return accept


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_every_packet_arrives_and_is_recorded_with_its_delay(tmp_path, transport):
    rx = Receiver(out_dir=str(tmp_path))
    res = send(rx, VOIP, out_dir=str(tmp_path), transport=transport, duration_s=1.0)
    (rr,) = rx.join()
    assert res.status == "completed" and rr.status == "completed"
    assert res.packets == 50 and rr.received_packets == 50
    assert res.receiver["received_packets"] == 50
    sent = read_records(tmp_path, "sent")
    table, d = delays(tmp_path)
    assert sent.column("seq").to_pylist() == list(range(50))
    assert sorted(table.column("seq").to_pylist()) == list(range(50))
    assert set(table.column("size_bytes").to_pylist()) == {172}
    # the header carries the send time: it matches the sender's record exactly
    assert np.allclose(np.sort(table.column("send_time_s").to_numpy()), sent.column("send_time_s").to_numpy())
    # one clock: the loopback delay is positive and small (generous for a loaded machine)
    assert d.min() > 0 and np.median(d) < 0.05
    # the sender followed the 20 ms schedule
    gaps = np.diff(sent.column("send_time_s").to_numpy())
    assert abs(np.median(gaps) - 0.02) < 0.003
    meta = read_run_metadata(tmp_path)
    assert meta["clock"] == "shared-monotonic" and meta["clock_source"] == "CLOCK_MONOTONIC"
    assert meta["sender"]["status"] == "completed" and meta["receiver"]["status"] == "completed"
    # no amplification: the receiver wrote only the two control answers, far less than it read
    assert rr.bytes_out <= 2 * control.REQUEST_PAD_BYTES and rr.bytes_out < rr.bytes_in / 10


def test_split_n_sends_n_pieces_and_records_whole_packets(tmp_path):
    rx = Receiver(out_dir=str(tmp_path))
    res = send(rx, CbrSource(1446, 0.02), out_dir=str(tmp_path), duration_s=0.6, split=4)
    (rr,) = rx.join()
    assert res.rtp_packets == 4 * res.packets and rr.rtp_packets == 4 * res.packets
    table, _ = delays(tmp_path)
    assert table.num_rows == res.packets
    assert set(table.column("size_bytes").to_pylist()) == {1446}
    assert rr.incomplete_packets == 0


def test_split_is_reduced_for_packets_too_small_to_split(tmp_path):
    rx = Receiver(out_dir=str(tmp_path))
    res = send(rx, CbrSource(2 * MIN_MEDIA_RTP_BYTES, 0.02), out_dir=str(tmp_path), duration_s=0.2, split=5)
    rx.join()
    assert res.rtp_packets == 2 * res.packets


@pytest.mark.parametrize("scheduler", ["blind", "intelligent"])
def test_parallel_connections_spread_packets_and_record_the_connection(tmp_path, scheduler):
    rx = Receiver(out_dir=str(tmp_path))
    res = send(rx, VOIP, out_dir=str(tmp_path), duration_s=0.6, connections=3, scheduler=scheduler)
    (rr,) = rx.join()
    assert rr.media_connections == 3 and rr.received_packets == res.packets == 30
    assert all(n >= 5 for n in res.per_connection_packets), res.per_connection_packets
    table, _ = delays(tmp_path)
    sent = read_records(tmp_path, "sent")
    by_seq_sent = dict(zip(sent.column("seq").to_pylist(), sent.column("connection").to_pylist()))
    for seq, conn in zip(table.column("seq").to_pylist(), table.column("connection").to_pylist()):
        assert by_seq_sent[seq] == conn
    if scheduler == "blind":
        assert res.per_connection_packets == [10, 10, 10]


def test_in_order_delivery_records_non_decreasing_times_in_sequence_order(tmp_path):
    rx = Receiver(out_dir=str(tmp_path))
    res = send(rx, VOIP, out_dir=str(tmp_path), duration_s=0.6, connections=3, delivery="in-order")
    (rr,) = rx.join()
    table, _ = delays(tmp_path)
    assert table.column("seq").to_pylist() == list(range(res.packets))
    assert np.all(np.diff(table.column("recv_time_s").to_numpy()) >= 0)
    assert rr.held_at_end == 0


def test_keepalives_fill_silences_and_are_not_recorded_as_media(tmp_path):
    rx = Receiver(out_dir=str(tmp_path))
    src = VoipOnOffSource(172, 0.02, mean_on_s=0.2, mean_off_s=0.3)
    res = send(rx, src, out_dir=str(tmp_path), duration_s=2.0, keepalive=True, seed=3)
    (rr,) = rx.join()
    assert res.keepalive_packets > 0 and rr.keepalive_packets == res.keepalive_packets
    assert rr.received_packets == res.packets
    # never more often than the media packets: at most one per 20 ms of the run
    assert res.keepalive_packets <= 2.0 / 0.02


def test_socket_options_are_applied_and_read_back(tmp_path):
    rx = Receiver()
    res = send(rx, VOIP, duration_s=0.2,
               tcp=TcpOptions(nodelay=False, congestion="reno", notsent_lowat_bytes=16384))
    rx.join()
    (opts,) = res.socket_options
    assert opts["nodelay"] is False and opts["congestion"] == "reno"
    assert opts["notsent_lowat_bytes"] == 16384


def test_unknown_congestion_control_is_a_parameter_error():
    rx = Receiver()
    with pytest.raises(Exception, match="congestion"):
        send(rx, VOIP, duration_s=0.2, tcp=TcpOptions(congestion="nosuchcc"))
    rx.stop.set()
    rx.join()


@pytest.mark.parametrize("version", [1, 99])
def test_receiver_refuses_another_protocol_version(version):
    """Version 1 (media without the header check) included: its packets would fail version 2's."""
    rx = Receiver()
    with socket.create_connection(("127.0.0.1", rx.port)) as s:
        req = control.encode({"type": "hello", "protocol": control.PROTOCOL, "version": version,
                              "run_id": "x", "params": {}}, pad_to=300)
        s.sendall(req)
        reply, n = control.recv(s, 5)
    assert reply["type"] == "reject" and "speaks version 2" in reply["reason"]
    assert n <= len(req)
    rx.stop.set()
    assert rx.join() == []


def test_a_tiny_request_gets_no_more_bytes_back_than_it_sent():
    rx = Receiver()
    with socket.create_connection(("127.0.0.1", rx.port)) as s:
        req = control.encode({"type": "hello", "protocol": control.PROTOCOL, "version": control.VERSION,
                              "run_id": "r", "params": {"transport": "bogus"}})
        s.sendall(req)
        s.settimeout(5)
        got = b""
        while chunk := s.recv(4096):
            got += chunk
    assert len(got) <= len(req)
    rx.stop.set()
    rx.join()


def test_sender_reports_an_unreachable_receiver():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]           # bound, not listening: connection refused
        with pytest.raises(SenderError, match="cannot reach"):
            run_sender(SenderConfig("127.0.0.1", port, run=RunParams(duration_s=0.1),
                                    connect_timeout_s=0.3), VOIP)


def test_interrupted_sender_keeps_records_and_receiver_ends_cleanly(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    stop = threading.Event()
    stopped_at = []
    threading.Timer(0.5, lambda: (stopped_at.append(time.monotonic()), stop.set())).start()
    cfg = SenderConfig("127.0.0.1", rx.port, run=RunParams(duration_s=30), out_dir=str(tmp_path / "tx"))
    t0 = time.monotonic()
    res = run_sender(cfg, VOIP, stop=stop)
    (rr,) = rx.join()
    # no more packets than its 20 ms clock produced until the stop actually came (a busy machine
    # may fire the 0.5 s timer late), and not one more 30 s run's worth
    assert res.status == "interrupted" and 10 <= res.packets <= (stopped_at[0] - t0) / 0.02 + 3, (res.packets, stopped_at[0] - t0)
    assert rr.status == "sender-disconnected"
    assert read_records(tmp_path / "tx", "sent").num_rows == res.packets
    assert read_records(tmp_path / "rx", "received").num_rows == rr.received_packets >= 10
    assert read_run_metadata(tmp_path / "rx")["receiver"]["status"] == "sender-disconnected"


def test_receiver_gone_mid_run_ends_the_sender_cleanly(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    threading.Timer(0.5, rx.stop.set).start()
    cfg = SenderConfig("127.0.0.1", rx.port, run=RunParams(duration_s=30), out_dir=str(tmp_path / "tx"))
    t0 = time.monotonic()
    res = run_sender(cfg, VOIP)
    (rr,) = rx.join()
    assert time.monotonic() - t0 < 10
    assert rr.status == "interrupted"
    assert res.status in ("receiver-disconnected", "connection-lost")
    assert read_records(tmp_path / "tx", "sent").num_rows == res.packets > 0


def test_receiver_idle_timeout_keeps_what_it_recorded(tmp_path):
    rx = Receiver(out_dir=str(tmp_path), idle_timeout_s=0.5)
    with socket.create_connection(("127.0.0.1", rx.port)) as ctl:
        accept = _hello(ctl, "idle", duration_s=5)
        with socket.create_connection(("127.0.0.1", rx.port)) as data:
            data.sendall(control.encode({"type": "data", "token": accept["token"], "connection": 0}))
            pkt = encode_media(flow_id=0, rtp_seq=0, rtp_timestamp=0, marker=True, seq=0,
                               send_time_ns=time.monotonic_ns(), size_bytes=172)
            data.sendall(frame(pkt))
            (rr,) = rx.join()        # nothing more: the receiver gives up after 0.5 s
    assert rr.status == "idle-timeout" and rr.received_packets == 1
    assert read_records(tmp_path, "received").num_rows == 1


def test_wrong_token_and_garbage_are_shut_out(tmp_path):
    rx = Receiver(out_dir=str(tmp_path), idle_timeout_s=2)
    with socket.create_connection(("127.0.0.1", rx.port)) as ctl:
        accept = _hello(ctl, "tok", duration_s=5)
        with socket.create_connection(("127.0.0.1", rx.port)) as bad:
            bad.sendall(control.encode({"type": "data", "token": "0" * 32, "connection": 0}))
            bad.settimeout(5)
            assert bad.recv(100) == b""        # closed by the receiver, nothing sent back
        with socket.create_connection(("127.0.0.1", rx.port)) as good:
            good.sendall(control.encode({"type": "data", "token": accept["token"], "connection": 0}))
            good.sendall(b"\x00\x05hello")      # below the RTP header size: framing error
            good.settimeout(5)
            assert good.recv(100) == b""
        control.send(ctl, {"type": "end"}, pad_to=control.REQUEST_PAD_BYTES)
        (rr,) = rx.join()
    assert any("outside" in e for e in rr.errors)
    assert rr.status == "corrupted" and "outside" in rr.failure      # garbage fails the flow
    assert rr.received_packets == 0


def test_a_run_directory_with_records_is_not_reused(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    send(rx, VOIP, out_dir=str(tmp_path / "tx"), duration_s=0.1)
    rx.join()
    with pytest.raises(Exception, match="already holds 'received' records"):
        run_receiver(ReceiverConfig(listen_port=0, out_dir=str(tmp_path / "rx")))
    rx2 = Receiver()
    with pytest.raises(Exception, match="already holds 'sent' records"):
        send(rx2, VOIP, out_dir=str(tmp_path / "tx"), duration_s=0.1)
    rx2.stop.set()
    rx2.join()


def test_a_stalled_receiver_bounds_the_application_queue_and_drains_out(tmp_path):
    """A receiver that accepts the run and then never reads: the sender's application queue
    stops at max_queue_bytes (later packets are skipped and recorded as dropped) and the run
    ends with drain-timeout instead of hanging."""
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    lst.bind(("127.0.0.1", 0))
    lst.listen(4)
    port = lst.getsockname()[1]
    conns = []

    def fake_receiver():
        ctl, _ = lst.accept()
        control.recv(ctl, 5)
        ctl.sendall(control.encode({"type": "accept", "version": control.VERSION, "token": "ab" * 16,
                                    "clock": "shared-monotonic"}))
        data, _ = lst.accept()
        conns.extend([ctl, data])          # keep them open, read nothing

    t = threading.Thread(target=fake_receiver, daemon=True)
    t.start()
    cfg = SenderConfig("127.0.0.1", port, run=RunParams(duration_s=1.0), out_dir=str(tmp_path),
                       tcp=TcpOptions(sndbuf_bytes=4096), max_queue_bytes=65536,
                       drain_timeout_s=0.5)
    res = run_sender(cfg, CbrSource(1446, 0.002))
    t.join(5)
    for c in conns + [lst]:
        c.close()
    assert res.status == "drain-timeout"
    assert res.queue_full_packets > 0 and res.dropped_packets == 0
    assert res.queued_bytes_at_end <= 65536
    sent = read_records(tmp_path, "sent")
    assert sent.num_rows == res.packets
    assert sum(sent.column("dropped").to_pylist()) == res.queue_full_packets


def test_in_order_gap_that_never_fills_is_skipped_not_held_for_ever(tmp_path, monkeypatch):
    from tcpdelay.transport import receiver as receiver_mod
    monkeypatch.setattr(receiver_mod, "MAX_HELD_PACKETS", 5)
    rx = Receiver(out_dir=str(tmp_path), idle_timeout_s=5)
    with socket.create_connection(("127.0.0.1", rx.port)) as ctl:
        accept = _hello(ctl, "gap", duration_s=5, delivery="in-order")
        with socket.create_connection(("127.0.0.1", rx.port)) as data:
            data.sendall(control.encode({"type": "data", "token": accept["token"], "connection": 0}))
            for seq in range(1, 11):         # seq 0 never comes
                data.sendall(frame(encode_media(flow_id=0, rtp_seq=seq, rtp_timestamp=0, marker=True,
                                                seq=seq, send_time_ns=time.monotonic_ns(), size_bytes=100)))
        control.send(ctl, {"type": "end"}, pad_to=control.REQUEST_PAD_BYTES)
        (rr,) = rx.join()
    assert read_records(tmp_path, "received").column("seq").to_pylist() == list(range(1, 11))
    assert any("0..0 never came" in e for e in rr.errors) and rr.held_at_end == 0


def test_a_length_beyond_the_flows_packet_size_fails_the_run_at_the_prefix(tmp_path):
    """The hello carries the source's largest packet (a CBR source's size): a longer length
    prefix on a media connection is corruption, caught before its body is read."""
    rx0 = Receiver()
    assert send(rx0, VOIP, duration_s=0.1).status == "completed"
    assert rx0.join()[0].params["max_packet_bytes"] == 172
    rx = Receiver(out_dir=str(tmp_path / "rx"), idle_timeout_s=5)
    with socket.create_connection(("127.0.0.1", rx.port)) as ctl:
        accept = _hello(ctl, "bound", duration_s=5, max_packet_bytes=100)
        with socket.create_connection(("127.0.0.1", rx.port)) as data:
            data.sendall(control.encode({"type": "data", "token": accept["token"], "connection": 0}))
            data.sendall(frame(encode_media(flow_id=0, rtp_seq=0, rtp_timestamp=0, marker=True, seq=0,
                                            send_time_ns=time.monotonic_ns(), size_bytes=100)))
            data.sendall(struct.pack("!H", 101))
            abort, _ = control.recv(ctl, 10)
            (rr,) = rx.join()
    assert abort == {"type": "abort", "status": "corrupted", "reason": rr.failure}
    assert rr.status == "corrupted" and "RFC 4571 length 101 is outside [12, 100]" in rr.failure
    assert rr.received_packets == 1 and rr.bytes_out <= rr.bytes_in


def test_a_reset_lost_after_a_drain_timeout_does_not_hold_the_receiver(tmp_path):
    """The sender says "end" with drain_timeout and resets its media connection; a reset is
    not repaired when lost (papers/004's 20 overloaded flows: a full bottleneck queue). Here the
    media connection simply stays open: the receiver still completes after its linger, keeps
    what arrived and answers the summary (before, it waited for a close that never came, past
    the testbed's deadline)."""
    rx = Receiver(out_dir=str(tmp_path), udp_linger_s=0.5, idle_timeout_s=30)
    with socket.create_connection(("127.0.0.1", rx.port)) as ctl:
        accept = _hello(ctl, "lostrst", duration_s=5)
        with socket.create_connection(("127.0.0.1", rx.port)) as media:
            media.sendall(control.encode({"type": "data", "token": accept["token"], "connection": 0}))
            for seq in range(3):
                media.sendall(frame(encode_media(flow_id=0, rtp_seq=seq, rtp_timestamp=0, marker=True, seq=seq,
                                                 send_time_ns=time.monotonic_ns(), piece=0, pieces=1,
                                                 size_bytes=200)))
            time.sleep(0.2)
            t_end = time.monotonic()
            control.send(ctl, {"type": "end", "packets": 5, "dropped_packets": 0, "rtp_packets": 5,
                               "keepalive_packets": 0, "drain_timeout": True}, pad_to=control.REQUEST_PAD_BYTES)
            summary, _ = control.recv(ctl, 10)
            waited_s = time.monotonic() - t_end
            (rr,) = rx.join()
    assert summary["type"] == "summary" and summary["received_packets"] == 3
    assert 0.5 <= waited_s < 5
    assert rr.status == "completed" and rr.received_packets == 3
    assert any("no reset arrived" in e for e in rr.errors), rr.errors


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_a_start_instant_is_kept_and_the_run_is_offered_before_it(tmp_path, transport):
    # The testbed starts each sender ahead of its flow's start: the run is offered and accepted
    # (and a TCP flow's media connection opened) in that lead, so the control exchange does not
    # cross a path that flows already started load; the first packet leaves at the start instant.
    rx = Receiver(out_dir=str(tmp_path), udp_linger_s=0.2)
    start_at = time.monotonic() + 3.0
    cfg = SenderConfig("127.0.0.1", rx.port, run=RunParams(transport=transport, duration_s=0.3),
                       out_dir=str(tmp_path))
    res = run_sender(cfg, VOIP, start_at=start_at)
    (rr,) = rx.join()
    assert res.status == "completed" and rr.status == "completed" and rr.received_packets == 15
    assert read_records(tmp_path, "sent").column("send_time_s").to_numpy().min() >= start_at
    # the receiver's run began at its accept, seconds before the start (offered after the wait,
    # it would have lasted the 0.3 s of sending and the 0.2-s linger)
    assert rr.elapsed_s > 1.5, rr.elapsed_s


def test_a_stop_during_the_wait_for_the_start_ends_the_run_before_it_sends(tmp_path):
    rx = Receiver(out_dir=str(tmp_path))
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    cfg = SenderConfig("127.0.0.1", rx.port, run=RunParams(transport="udp", duration_s=0.5),
                       out_dir=str(tmp_path))
    t = time.monotonic()
    res = run_sender(cfg, VOIP, start_at=t + 30.0, stop=stop)
    assert time.monotonic() - t < 10 and res.status == "interrupted" and res.packets == 0
    rx.stop.set()
    rx.join()
