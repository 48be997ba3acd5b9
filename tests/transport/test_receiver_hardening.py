"""A receiver one may leave listening (issue 53, items 1-3): no input ends it, a run writes only
in its own folder, and what one peer may make it hold or write is bounded.

Each test is a finding of the issue, rerun: on the code before the fix each of them failed (the
receiver died, wrote outside the run's folder, recorded forged packets or grew without bound).
Every test ends by checking that the receiver still serves a real sender.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import struct
import time

import pytest
from receiver_helpers import VOIP, Receiver, hello, media_conn, pkt, real_run, wait_for

from tcpdelay.records import read_records, read_run_metadata
from tcpdelay.transport import RunParams, SenderConfig, SenderError, run_sender
from tcpdelay.transport import control
from tcpdelay.transport.framing import frame

# -- item 1: no crash on any input ---------------------------------------------------------------

def test_a_hello_nested_2000_levels_deep_is_refused_and_the_receiver_serves_on(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    body = b"[" * 2000 + b"]" * 2000
    with socket.create_connection(("127.0.0.1", rx.port), timeout=10) as s:
        s.sendall(struct.pack("!H", len(body)) + body)
        s.settimeout(10)
        assert s.recv(100) == b""            # closed without a word
    real_run(rx, tmp_path / "tx", run_id="after-deep")
    (res,) = rx.close()
    assert res.run_id == "after-deep" and res.status == "completed"


def _short_initial() -> bytes:
    """A long-header QUIC v1 Initial in a 40-byte datagram: aioquic drops it without a path,
    and its datagrams_to_send then raised IndexError (the forged Initial of the issue)."""
    dcid, scid = os.urandom(8), os.urandom(8)
    return (bytes([0xC3]) + struct.pack("!I", 1) + bytes([8]) + dcid + bytes([8]) + scid + b"\x00"
            + struct.pack("!H", 0x4000 | 24) + bytes(24))


def test_a_forged_quic_initial_neither_ends_the_receiver_nor_the_real_run(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    ctl, accept = hello(rx, "forged", transport="quic-stream", duration_s=2)
    assert accept["type"] == "accept"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u1, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u2:
        u1.sendto(_short_initial(), ("127.0.0.1", rx.port))
        u2.sendto(_short_initial(), ("127.0.0.1", rx.port))          # another port, same address
        time.sleep(0.5)
    ctl.close()
    real_run(rx, tmp_path / "tx", transport="quic-stream", run_id="after-forged")
    results = rx.close()
    assert [r.run_id for r in results] == ["after-forged"] and results[0].status == "completed"


def test_a_garbage_initial_from_another_port_does_not_take_the_runs_quic_connection(tmp_path):
    """A 1200-byte long-header Initial that aioquic cannot read made the run's connection, and
    the sender's real Initial from its own port was then ignored (not that connection)."""
    from quic_flood import quic_high_offset_flood

    rx = Receiver(out_dir=str(tmp_path / "rx"))
    ctl, accept = hello(rx, "taken", transport="quic-stream", duration_s=5)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as forger:
        forger.sendto(bytes([0xC3]) + struct.pack("!I", 1) + bytes([8]) + os.urandom(8) + bytes([8])
                      + os.urandom(8) + b"\x00" + struct.pack("!H", 0x4000 | 1180) + os.urandom(1180),
                      ("127.0.0.1", rx.port))
        time.sleep(0.3)
        # the real client's handshake completes, and its first packet is the run's
        assert quic_high_offset_flood(rx.port, [0], payload=frame(pkt(0))) == "open"
    ctl.close()
    real_run(rx, tmp_path / "tx", transport="quic-stream", run_id="after-taken")
    taken, after = rx.close()
    assert taken.quic["connections_discarded"] == 1 and taken.quic["handshake_completed"]
    assert after.status == "completed"


def test_a_full_disk_fails_that_run_with_its_reason_and_keeps_the_earlier_runs(tmp_path, monkeypatch):
    from tcpdelay import records

    rx = Receiver(out_dir=str(tmp_path / "rx"))
    real_run(rx, tmp_path / "tx1", run_id="before-full")
    real_write = records.pq.write_table

    def full(table, where, *a, **kw):
        if "received" in str(where) and "while-full" in str(where):
            raise OSError(errno.ENOSPC, "No space left on device", str(where))
        return real_write(table, where, *a, **kw)

    monkeypatch.setattr(records.pq, "write_table", full)
    sent = run_sender(SenderConfig("127.0.0.1", rx.port, run=RunParams(duration_s=0.4),
                                   out_dir=str(tmp_path / "tx2"), run_id="while-full"), VOIP)
    assert sent.status != "completed"
    monkeypatch.setattr(records.pq, "write_table", real_write)
    real_run(rx, tmp_path / "tx3", run_id="after-full")
    before, full_run, after = rx.close()
    assert full_run.status == "failed" and "disk is full" in full_run.failure
    assert "ENOSPC" in full_run.failure
    assert before.status == after.status == "completed"
    assert read_records(tmp_path / "rx" / "before-full", "received").num_rows == before.received_packets > 0
    assert read_run_metadata(tmp_path / "rx" / "before-full")["receiver"]["status"] == "completed"
    assert not list((tmp_path / "rx" / "while-full" / "received").glob("*"))     # nothing half-written
    assert any("while-full" in n and "failed" in n for n in rx.notices)


def test_a_run_id_naming_an_existing_file_is_refused_and_the_receiver_serves_on(tmp_path):
    out = tmp_path / "rx"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    rx = Receiver(out_dir=str(out))
    with pytest.raises(SenderError, match="not a directory"):
        run_sender(SenderConfig("127.0.0.1", rx.port, run=RunParams(duration_s=0.4),
                                out_dir=str(tmp_path / "tx"), run_id="notes.txt"), VOIP)
    real_run(rx, tmp_path / "tx2", run_id="after-file")
    (res,) = rx.close()
    assert res.run_id == "after-file" and (out / "notes.txt").read_text() == "mine"


# -- item 2: runs stay in their folders ---------------------------------------------------------

@pytest.mark.parametrize("run_id", ["..", ".", "received", "run.json", "abc\n", ".hidden", "-x", "a/b"])
def test_a_run_id_that_would_leave_the_runs_folder_is_refused(tmp_path, run_id):
    out = tmp_path / "work" / "rx"
    rx = Receiver(out_dir=str(out))
    ctl, answer = hello(rx, run_id)
    ctl.close()
    assert answer["type"] == "reject" and "run_id" in answer["reason"]
    real_run(rx, tmp_path / "tx", run_id="after-bad-id")
    (res,) = rx.close()
    assert res.run_id == "after-bad-id"
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["rx"]
    assert sorted(p.name for p in out.iterdir()) == ["after-bad-id"]


def test_the_sender_refuses_such_a_run_id_too():
    from tcpdelay.errors import ParameterError
    for bad in ("..", "abc\n", "received"):
        with pytest.raises(ParameterError, match="run_id"):
            SenderConfig("127.0.0.1", 5000, run_id=bad)


def test_a_run_id_naming_a_sweeps_folder_or_another_run_is_refused(tmp_path):
    out = tmp_path / "results"
    (out / "sweep-a" / "runs").mkdir(parents=True)
    (out / "sweep-a" / "summary.json").write_text("{}")
    rx = Receiver(out_dir=str(out))
    real_run(rx, tmp_path / "tx1", run_id="run-1")
    for taken in ("sweep-a", "run-1"):
        ctl, answer = hello(rx, taken)
        ctl.close()
        assert answer["type"] == "reject", answer
    # the sender of the same run may share the folder (both ends on one machine)
    res = real_run(rx, out / "shared", run_id="shared")
    results = rx.close()
    assert [r.run_id for r in results] == ["run-1", "shared"]
    assert sorted(p.name for p in (out / "sweep-a").iterdir()) == ["runs", "summary.json"]
    assert read_records(out / "shared", "received").num_rows == res.packets


# -- UDP: only the run's own socket -----------------------------------------------------------

def test_udp_datagrams_from_another_port_of_the_senders_address_are_counted_not_recorded(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"))
    ctl, accept = hello(rx, "udp-forged", transport="udp", duration_s=2)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as real, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as forger:
        for seq in range(10):
            real.sendto(pkt(seq), ("127.0.0.1", rx.port))
        for seq in range(5, 30):                     # duplicates and made-up packets
            forger.sendto(pkt(seq), ("127.0.0.1", rx.port))
        for seq in range(10, 20):
            real.sendto(pkt(seq), ("127.0.0.1", rx.port))
        control.send(ctl, {"type": "end"}, pad_to=control.REQUEST_PAD_BYTES)
        control.recv(ctl, 10)
    ctl.close()
    real_run(rx, tmp_path / "tx", transport="udp", run_id="after-udp")
    forged, _ = rx.close()
    seqs = read_records(tmp_path / "rx" / "udp-forged", "received").column("seq").to_pylist()
    assert sorted(seqs) == list(range(20))
    assert forged.other_port_datagrams == 25 and forged.duplicate_packets == 0


# -- item 3: bounds ------------------------------------------------------------------------------

def test_a_flood_of_unknown_control_messages_ends_the_run_and_its_errors_are_capped(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"), max_control_messages=50, max_errors_kept=10)
    ctl, accept = hello(rx, "ctl-flood", duration_s=5)
    with media_conn(rx, accept["token"]) as data:
        data.sendall(frame(pkt(0)))
        msg = control.encode({"type": "x" * 40})
        try:
            for _ in range(2000):
                ctl.sendall(msg)
        except OSError:
            pass                                     # the receiver closed the run
        wait_for(lambda: len(rx.notices) > 0 or not rx.alive())
    ctl.close()
    real_run(rx, tmp_path / "tx", run_id="after-flood")
    flood, _ = rx.close()
    assert flood.status == "over-limit" and "max_control_messages" in flood.failure
    assert len(flood.errors) == 10 and flood.errors_dropped > 0
    assert os.path.getsize(tmp_path / "rx" / "ctl-flood" / "run.json") < 64 * 1024


@pytest.mark.parametrize("what, cfg, params, reason", [
    ("duration", {}, {"duration_s": 86400}, "max_run_duration_s"),
    ("disk", {"min_free_disk_bytes": 2**50}, {}, "floor"),
])
def test_a_run_beyond_a_bound_is_refused_at_its_hello(tmp_path, what, cfg, params, reason):
    rx = Receiver(out_dir=str(tmp_path / "rx"), **cfg)
    ctl, answer = hello(rx, f"too-{what}", **params)
    ctl.close()
    assert answer["type"] == "reject" and reason in answer["reason"]
    rx.close()
    assert not (tmp_path / "rx").exists() or not any((tmp_path / "rx").iterdir())


def test_runs_per_peer_per_minute_are_bounded(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"), max_runs_per_peer_per_minute=3)
    for i in range(3):
        real_run(rx, tmp_path / f"tx{i}", run_id=f"r{i}")
    ctl, answer = hello(rx, "r3")
    ctl.close()
    assert answer["type"] == "reject" and "at most 3 a minute" in answer["reason"]
    assert len(rx.close()) == 3


def test_a_run_past_its_packet_bound_ends_over_limit_and_the_sender_is_told(tmp_path):
    rx = Receiver(out_dir=str(tmp_path / "rx"), max_run_packets=10)
    sent = run_sender(SenderConfig("127.0.0.1", rx.port, run=RunParams(duration_s=1.0),
                                   out_dir=str(tmp_path / "tx"), run_id="big"), VOIP)
    assert sent.status == "receiver-failed" and "max_run_packets" in (sent.error or "")
    (res,) = rx.close()
    assert res.status == "over-limit" and res.received_packets <= sent.packets < 50    # of a 1-s, 50-packet run


def test_a_peer_trickling_control_bytes_does_not_hold_the_receiver(tmp_path):
    """The holder of the issue: a run's peer that sends a few bytes now and then, never a
    packet of its flow. Only the flow's packets (and its "end") keep a run alive now."""
    rx = Receiver(out_dir=str(tmp_path / "rx"), idle_timeout_s=1.0)
    ctl, accept = hello(rx, "holder", duration_s=600)
    ended_while_trickling = False
    with media_conn(rx, accept["token"]) as data:
        data.sendall(frame(pkt(0)))
        body = json.dumps({"type": "ping", "pad": "-" * 90}).encode()
        trickle = struct.pack("!H", len(body)) + body
        deadline = time.monotonic() + 60
        i = 0
        while time.monotonic() < deadline:
            try:
                ctl.sendall(trickle[i % len(trickle):i % len(trickle) + 1])
            except OSError:
                pass
            i += 1
            if _ended(tmp_path, "holder"):
                ended_while_trickling = True
                break
            time.sleep(0.1)
    ctl.close()
    assert ended_while_trickling
    real_run(rx, tmp_path / "tx", run_id="after-holder")
    holder, _ = rx.close()
    assert holder.status == "idle-timeout"


def _ended(tmp_path, run_id) -> bool:
    meta = read_run_metadata(tmp_path / "rx" / run_id) if (tmp_path / "rx" / run_id / "run.json").exists() else {}
    return meta.get("receiver", {}).get("status") not in (None, "running")


def test_an_in_order_gap_after_gap_costs_one_line_per_skip_not_per_packet(tmp_path, monkeypatch):
    from tcpdelay.transport import receiver as receiver_mod
    monkeypatch.setattr(receiver_mod, "MAX_HELD_PACKETS", 100)
    rx = Receiver(out_dir=str(tmp_path / "rx"), max_errors_kept=1000)
    ctl, accept = hello(rx, "gaps", duration_s=5, delivery="in-order")
    with media_conn(rx, accept["token"]) as data:
        data.sendall(b"".join(frame(pkt(seq)) for seq in range(1, 4000, 2)))     # every even seq missing
    control.send(ctl, {"type": "end"}, pad_to=control.REQUEST_PAD_BYTES)
    control.recv(ctl, 10)
    ctl.close()
    real_run(rx, tmp_path / "tx", run_id="after-gaps")
    gaps, _ = rx.close()
    assert gaps.status == "completed" and gaps.received_packets + gaps.held_at_end == 2000
    assert 1 <= len(gaps.errors) <= 2000 // 50 + 1        # one per skip of half the held packets


@pytest.mark.testbed
def test_a_really_full_file_system_fails_the_run_and_the_receiver_serves_on(tmp_path):
    """The finding as found: a small tmpfs as the output folder, filled up after a first run
    (needs root to mount it)."""
    import subprocess

    out = tmp_path / "small"
    out.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(out)],
                                          capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a tmpfs")
    try:
        rx = Receiver(out_dir=str(out))
        real_run(rx, tmp_path / "tx1", run_id="before-full")
        with open(out / "filler", "wb") as f:          # every byte left
            try:
                while True:
                    f.write(bytes(65536))
                    f.flush()
            except OSError as err:
                assert err.errno == errno.ENOSPC
        sent = run_sender(SenderConfig("127.0.0.1", rx.port, run=RunParams(duration_s=0.4),
                                       out_dir=str(tmp_path / "tx2"), run_id="while-full"), VOIP)
        assert sent.status != "completed"
        os.unlink(out / "filler")
        real_run(rx, tmp_path / "tx3", run_id="after-full")
        before, full, after = rx.close()
        assert full.status == "failed" and "ENOSPC" in full.failure, full
        assert before.status == after.status == "completed"
        assert read_records(out / "before-full", "received").num_rows == before.received_packets > 0
        assert read_run_metadata(out / "before-full")["receiver"]["status"] == "completed"
    finally:
        subprocess.run(["umount", str(out)], check=False)
