"""Media over QUIC end to end over loopback: the three mappings deliver and record every packet,
a frame stream past its deadline is reset and its unsent packets are not delivered, the
certificate is made per run and pinned, a killed receiver fails the run, bad input is one line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading

import numpy as np
import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.records import read_records, read_run_metadata
from tcpdelay.traffic import CbrSource, build_source
from tcpdelay.transport import ReceiverConfig, RunParams, SenderConfig, SenderError, run_receiver, run_sender
from tcpdelay.transport.quic_config import QuicOptions
from tcpdelay.transport.quic_tls import make_certificate

TCPDELAY = [sys.executable, "-m", "tcpdelay"]
MAPPINGS = ("quic-stream", "quic-frame-streams", "quic-datagram")


class Receiver:
    """run_receiver in a thread on a free loopback port."""

    def __init__(self, **kw):
        kw.setdefault("listen_host", "127.0.0.1")
        kw.setdefault("idle_timeout_s", 10.0)
        self.cfg = ReceiverConfig(**kw)
        self.results, self.error = [], None
        ready = threading.Event()

        def main():
            try:
                self.results = run_receiver(self.cfg, on_ready=lambda a: (setattr(self, "port", a[1]), ready.set()))
            except BaseException as err:  # noqa: BLE001 - reported by join()
                self.error = err
                ready.set()

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        assert ready.wait(10)
        assert self.error is None, self.error

    def join(self, timeout=60):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "receiver did not finish"
        assert self.error is None, self.error
        return self.results


def _send(rx, source, transport, out_dir, duration_s=1.0, **kw):
    cfg = SenderConfig("127.0.0.1", rx.port, run=RunParams(transport=transport, duration_s=duration_s),
                       out_dir=str(out_dir), **kw)
    return run_sender(cfg, source)


@pytest.mark.parametrize("transport", MAPPINGS)
def test_each_mapping_delivers_and_records_every_voip_packet(tmp_path, transport):
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    res = _send(rx, build_source("voip"), transport, tmp_path / "tx", quic=QuicOptions(congestion="cubic"))
    (got,) = rx.join()
    assert res.status == "completed" and got.status == "completed", (res.error, got.errors)
    assert res.packets == 50 and got.received_packets == 50 and got.incomplete_packets == 0
    sent = read_records(tmp_path / "tx", "sent")
    received = read_records(tmp_path / "rx", "received")
    assert sorted(received["seq"].to_pylist()) == sent["seq"].to_pylist() == list(range(50))
    assert not any(sent["dropped"].to_pylist())
    # one shared clock: the records' send times are the sender's, and every delay is positive
    by_seq = dict(zip(sent["seq"].to_pylist(), sent["send_time_s"].to_pylist()))
    assert all(by_seq[s] == t for s, t in zip(received["seq"].to_pylist(), received["send_time_s"].to_pylist()))
    d = received["recv_time_s"].to_numpy() - received["send_time_s"].to_numpy()
    assert (d > 0).all() and read_run_metadata(tmp_path / "rx")["clock"] == "shared-monotonic"
    # the transport's own state over time, as tcp_state is sampled
    state = read_records(tmp_path / "tx", "quic_state")
    assert state.num_rows >= 2
    assert min(state["cwnd_bytes"].to_pylist()) > 0
    assert all(s is not None and s > 0 for s in state["srtt_s"].to_pylist()[1:])
    # what each end says of the connection
    assert res.quic["alpn"] == "tcpdelay-media/1" and res.quic["options"]["congestion"] == "cubic"
    assert got.quic["handshake_completed"] and got.quic["cert_sha256"] == res.quic["cert_sha256"]
    if transport == "quic-frame-streams":          # a stream per packet: VoIP has no frames
        assert res.quic["streams_opened"] == got.quic["streams"] == got.quic["streams_finished"] == 50
    elif transport == "quic-stream":
        assert got.quic["streams"] == 1
    else:                                           # never retransmitted: one frame per packet
        assert res.quic["datagram_frames"] == got.quic["datagram_frames"] == 50
        assert got.quic["streams"] == 0


def test_datagrams_larger_than_a_quic_packet_go_as_pieces_and_are_reassembled(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    res = _send(rx, CbrSource(3000, 0.02), "quic-datagram", tmp_path / "tx", duration_s=0.5)
    (got,) = rx.join()
    assert res.status == "completed" and got.status == "completed"
    assert res.quic["datagram_frames"] == 25 * 3 == got.rtp_packets      # 3000 B in 3 pieces of <= 1136 B
    received = read_records(tmp_path / "rx", "received")
    assert received.num_rows == 25 and set(received["size_bytes"].to_pylist()) == {3000}


def test_a_frame_stream_past_its_deadline_is_reset_and_its_unsent_packets_not_delivered(tmp_path):
    """8 Mb/s video: a frame (~33 kB) is larger than QUIC's initial window (12 kB), so it cannot
    be acknowledged within a 1 µs deadline: every frame's stream is reset, the part of the frame
    not yet sent is never delivered, and nothing after the reset arrives on it."""
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    res = _send(rx, build_source("mpeg4-tes", rate_bps=8e6), "quic-frame-streams", tmp_path / "tx",
                quic=QuicOptions(deadline_s=1e-6))
    (got,) = rx.join()
    assert res.status == "completed" and got.status == "completed", (res.error, got.errors)
    assert res.quic["streams_reset"] > 0 and got.quic["streams_reset"] > 0
    sent = read_records(tmp_path / "tx", "sent")
    received = read_records(tmp_path / "rx", "received")
    assert 0 < received.num_rows < sent.num_rows
    # every frame sent has its own stream; a frame's packets are not all delivered when its
    # stream was reset, and the receiver counts no packet twice
    frames = set(sent["frame_id"].to_pylist())
    assert res.quic["streams_opened"] == len(frames)
    assert len(set(received["seq"].to_pylist())) == received.num_rows
    frame_of = dict(zip(sent["seq"].to_pylist(), sent["frame_id"].to_pylist()))
    whole = {f: 0 for f in frames}
    for s in sent["seq"].to_pylist():
        whole[frame_of[s]] += 1
    got_per_frame = {f: 0 for f in frames}
    for s in received["seq"].to_pylist():
        got_per_frame[frame_of[s]] += 1
    cut = [f for f in frames if got_per_frame[f] < whole[f]]
    assert len(cut) > 0
    # without a deadline the same video is delivered whole
    rx2 = Receiver(out_dir=str(tmp_path / "rx2"))
    res2 = _send(rx2, build_source("mpeg4-tes", rate_bps=8e6), "quic-frame-streams", tmp_path / "tx2")
    (got2,) = rx2.join()
    assert res2.status == "completed" and res2.quic["streams_reset"] == 0
    assert got2.received_packets == res2.packets


def test_a_datagram_queued_past_its_deadline_is_dropped_at_the_sender_never_sent(tmp_path):
    """8 Mb/s video as datagrams: a frame (~33 kB) is larger than QUIC's initial window (12 kB),
    so congestion control holds part of the first frames' DATAGRAM frames; with a 1 ms deadline
    those still queued then are dropped at the sender (never on the wire, so never delivered),
    what was let out arrives, and without a deadline the same video is delivered whole."""
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    res = _send(rx, build_source("mpeg4-tes", rate_bps=8e6), "quic-datagram", tmp_path / "tx",
                quic=QuicOptions(deadline_s=1e-3))
    (got,) = rx.join()
    assert res.status == "completed" and got.status == "completed", (res.error, got.errors)
    dropped = res.quic["deadline_dropped_datagrams"]
    assert 0 < dropped < res.quic["datagram_frames"]
    # every DATAGRAM frame the receiver got was sent: none dropped at the sender arrived
    assert got.quic["datagram_frames"] <= res.quic["datagram_frames"] - dropped
    sent = read_records(tmp_path / "tx", "sent")
    received = read_records(tmp_path / "rx", "received")
    assert 0 < received.num_rows < sent.num_rows
    rx2 = Receiver(out_dir=str(tmp_path / "rx2"))
    res2 = _send(rx2, build_source("mpeg4-tes", rate_bps=8e6), "quic-datagram", tmp_path / "tx2")
    (got2,) = rx2.join()
    assert res2.status == "completed" and res2.quic["deadline_dropped_datagrams"] == 0
    assert got2.received_packets == res2.packets


def test_a_stream_per_group_of_pictures_opens_one_stream_per_i_frame(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    res = _send(rx, build_source("mpeg4-tes", rate_bps=1e6), "quic-frame-streams", tmp_path / "tx",
                duration_s=2.0, quic=QuicOptions(streams_per="gop"))
    (got,) = rx.join()
    assert res.status == "completed" and got.status == "completed", (res.error, got.errors)
    sent = read_records(tmp_path / "tx", "sent")
    i_frames = {f for f, t in zip(sent["frame_id"].to_pylist(), sent["frame_type"].to_pylist()) if t == "I"}
    frames = set(sent["frame_id"].to_pylist())
    assert 1 < len(i_frames) < len(frames)
    assert res.quic["streams_opened"] == got.quic["streams"] == got.quic["streams_finished"] == len(i_frames)
    assert got.received_packets == res.packets == sent.num_rows


def test_the_certificate_is_made_per_run_pinned_and_removed(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"), runs=2)
    a = _send(rx, build_source("voip"), "quic-datagram", tmp_path / "tx1", duration_s=0.3)
    b = _send(rx, build_source("voip"), "quic-stream", tmp_path / "tx2", duration_s=0.3)
    r1, r2 = rx.join()
    assert a.status == b.status == r1.status == r2.status == "completed"
    assert a.quic["cert_sha256"] != b.quic["cert_sha256"]
    assert (r1.quic["cert_sha256"], r2.quic["cert_sha256"]) == (a.quic["cert_sha256"], b.quic["cert_sha256"])
    cert = make_certificate()
    from pathlib import Path

    assert Path(cert.cert_path).is_file() and Path(cert.key_path).stat().st_mode & 0o077 == 0
    cert.remove()
    assert not Path(cert.directory).exists()


def test_a_quic_sender_refuses_a_receiver_without_a_certificate(tmp_path):
    """A control peer that accepts without a certificate fingerprint (not a QUIC-capable
    receiver) is refused before any media: one line, no records."""
    from tcpdelay.transport import control

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def fake():
        c, _ = srv.accept()
        _, n = control.recv(c, 5.0)
        c.sendall(control.answer({"type": "accept", "version": control.VERSION, "token": "ab" * 16,
                                  "clock": "shared-monotonic"}, n))
        c.recv(1)
        c.close()

    t = threading.Thread(target=fake, daemon=True)
    t.start()
    cfg = SenderConfig("127.0.0.1", port, run=RunParams(transport="quic-stream", duration_s=0.2),
                       out_dir=str(tmp_path / "tx"))
    with pytest.raises(SenderError, match="no certificate fingerprint"):
        run_sender(cfg, build_source("voip"))
    srv.close()
    assert not (tmp_path / "tx" / "sent").exists()


def test_a_peer_of_another_quic_version_gets_version_negotiation():
    """RFC 9000 §6: the first packet of a version the receiver lacks is answered with the
    versions it speaks, and no connection is made."""
    import os

    from aioquic.buffer import Buffer
    from aioquic.quic.packet import QuicPacketType, QuicProtocolVersion, pull_quic_header

    from tcpdelay.transport import clock, control

    stop = threading.Event()
    ready = threading.Event()
    box = {}
    t = threading.Thread(target=lambda: box.update(r=run_receiver(
        ReceiverConfig(listen_host="127.0.0.1", idle_timeout_s=5), stop=stop,
        on_ready=lambda a: (box.update(port=a[1]), ready.set()))), daemon=True)
    t.start()
    assert ready.wait(10)
    ctl = socket.create_connection(("127.0.0.1", box["port"]), timeout=5)
    control.send(ctl, {"type": "hello", "protocol": control.PROTOCOL, "version": control.VERSION,
                       "run_id": "vn", "boot_id": clock.boot_id(),
                       "params": RunParams(transport="quic-datagram").to_dict()}, pad_to=control.REQUEST_PAD_BYTES)
    accept, _ = control.recv(ctl, 5.0)
    assert accept["type"] == "accept" and len(accept["cert_sha256"]) == 64
    dcid, scid = os.urandom(8), os.urandom(8)
    initial = (bytes([0xC3]) + (0x1A2A3A4A).to_bytes(4, "big") + bytes([8]) + dcid + bytes([8]) + scid
               + bytes([0]) + (0x4000 | 1100).to_bytes(2, "big"))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.settimeout(5)
    udp.sendto(initial + bytes(1200 - len(initial)), ("127.0.0.1", box["port"]))
    answer = udp.recv(2048)
    udp.close()
    ctl.close()
    stop.set()
    t.join(20)
    h = pull_quic_header(Buffer(data=answer), host_cid_length=8)
    assert h.packet_type == QuicPacketType.VERSION_NEGOTIATION
    assert h.destination_cid == scid and h.source_cid == dcid
    assert QuicProtocolVersion.VERSION_1 in h.supported_versions and 0x1A2A3A4A not in h.supported_versions


@pytest.mark.parametrize("kw, match", [
    (dict(transport="quic-stream", connections=2), "parallel connections need --transport tcp"),
    (dict(transport="quic-datagram", delivery="in-order"), "in-order needs --transport tcp"),
    (dict(transport="quic-bogus"), "is not one of tcp, udp, quic-stream"),
])
def test_bad_quic_run_parameters_are_refused(kw, match):
    with pytest.raises(ParameterError, match=match):
        RunParams(**kw)


@pytest.mark.parametrize("opts, match", [
    (dict(congestion="bbr"), "aioquic has no BBR"),
    (dict(congestion="vegas"), "not one of newreno, cubic"),
    (dict(deadline_s=0), "deadline_s"),
    (dict(max_datagram_bytes=1000), "max_datagram_bytes"),
])
def test_bad_quic_options_are_refused(opts, match):
    with pytest.raises(ParameterError, match=match):
        QuicOptions(**opts)


@pytest.mark.parametrize("args, match", [
    (["--transport", "quic-bogus"], "'quic-bogus' is not one of"),
    (["--transport", "quic-stream", "--congestion", "bbr"], "aioquic has no BBR"),
    (["--transport", "quic-stream", "--quic-deadline-s", "0.1"], "needs --transport quic-frame-streams"),
    (["--quic-deadline-s", "0.1"], "need a quic-* --transport"),
    (["--transport", "quic-datagram", "--keepalive"], "keepalive needs --transport tcp or udp"),
])
def test_bad_quic_command_line_is_one_line_and_exit_2(tmp_path, args, match):
    proc = subprocess.run([*TCPDELAY, "send", "--to", "127.0.0.1:1", *args, "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_send_quic_datagram_between_the_commands_and_a_killed_receiver_fails_the_run(tmp_path):
    port = _free_port()
    rx = subprocess.Popen([*TCPDELAY, "recv", "--listen", f"127.0.0.1:{port}", "--out", str(tmp_path / "rx"),
                           "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on" in rx.stderr.readline()
        tx = subprocess.run([*TCPDELAY, "send", "--to", f"127.0.0.1:{port}", "--transport", "quic-datagram",
                             "--duration-s", "0.5", "--out", str(tmp_path / "tx"), "--json"],
                            capture_output=True, text=True, timeout=60)
        out, _ = rx.communicate(timeout=30)
    finally:
        rx.kill()
    assert tx.returncode == 0, tx.stderr
    sent, got = json.loads(tx.stdout), json.loads(out)["runs"][0]
    assert sent["transport"] == "quic-datagram" and sent["packets"] == got["received_packets"] == 25
    assert got["quic"]["cert_sha256"] == sent["quic"]["cert_sha256"]

    # the receiver killed mid-run: the sender's run fails (exit 1), as with TCP
    port = _free_port()
    rx = subprocess.Popen([*TCPDELAY, "recv", "--listen", f"127.0.0.1:{port}", "--out", str(tmp_path / "rx2")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on" in rx.stderr.readline()
        tx = subprocess.Popen([*TCPDELAY, "send", "--to", f"127.0.0.1:{port}", "--transport", "quic-stream",
                               "--duration-s", "30", "--out", str(tmp_path / "tx2"), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(600):          # until the run's media has started
            if (tmp_path / "rx2" / "run.json").exists():
                break
            threading.Event().wait(0.05)
        rx.kill()
        out, err = tx.communicate(timeout=60)
    finally:
        rx.kill()
        tx.kill()
    assert tx.returncode == 1, err
    assert json.loads(out)["status"] in ("receiver-disconnected", "connection-lost")
    assert np.isfinite(read_records(tmp_path / "tx2", "sent")["send_time_s"].to_numpy()).all()
