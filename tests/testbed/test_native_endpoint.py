"""The native endpoint (tcpdelay.native, emulator/src/endpoint): the media flows' per-packet loop
in ``tcpdelay-endpoint``, the control exchange in Python.

Real kernel TCP and UDP, real namespaces and the real emulator where a path is needed, loopback
where the pairing is the point: native and Python ends talk to each other both ways; a testbed
run on the native endpoint writes the records a run on the Python endpoints writes (the same
parts, columns, packets; delays within the emulator's precision); the kernel's receive stamps the
native receiver records follow the emulator's own delivery times (its pcap); a killed endpoint
fails its run naming itself; bad input is one line and exit status 2.
"""

from __future__ import annotations

import json
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from tcpdelay.native.engine import NativeEngine, find_binary
from tcpdelay.native.receiver import run_native_receiver
from tcpdelay.native.sender import run_native_sender
from tcpdelay.records import read_records
from tcpdelay.testbed.grouped_endpoints import ENDPOINTS_ENV
from tcpdelay.testbed.netns import unavailable_reason
from tcpdelay.traffic.cbr import CbrSource
from tcpdelay.transport import ReceiverConfig, RunParams, SenderConfig, run_receiver, run_sender

try:
    BINARY = find_binary()
except Exception as err:  # noqa: BLE001 - not built: every test here says so
    BINARY, WHY = None, str(err)
else:
    WHY = ""
needs_binary = pytest.mark.skipif(BINARY is None, reason=WHY)
needs_testbed = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

# --------------------------------------------------------------------------- cross pairings


def _free_port() -> int:
    """A port free for both TCP and UDP on loopback now (the machine is shared: fixed ports
    collide with other test runs)."""
    import socket

    while True:
        t = socket.socket()
        t.bind(("127.0.0.1", 0))
        port = t.getsockname()[1]
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            t.close()
            u.close()


def _pair(tmp: Path, port: int, transport: str, connections: int, split: int, tx_native: bool, rx_native: bool,
          source=CbrSource(200, 0.01), duration_s: float = 1.5) -> tuple[dict, dict]:
    """One run over loopback, each end native or Python; (sender result, receiver result)."""
    engine = NativeEngine() if tx_native or rx_native else None
    rcfg = ReceiverConfig(listen_host="127.0.0.1", listen_port=port, out_dir=str(tmp / "rx"), runs=1,
                          idle_timeout_s=20.0)
    got: dict = {}

    def receive():
        try:
            got["rx"] = run_native_receiver(rcfg, engine) if rx_native else [r.to_dict() for r in run_receiver(rcfg)]
        except BaseException as err:  # noqa: BLE001 - reported by the assertion below
            got["rx"] = err

    t = threading.Thread(target=receive)
    t.start()
    try:
        time.sleep(0.3)
        scfg = SenderConfig(to_host="127.0.0.1", to_port=port, out_dir=str(tmp / "tx"), run_id="pair",
                            run=RunParams(transport=transport, connections=connections, split=split,
                                          duration_s=duration_s, flow_id=9),
                            drain_timeout_s=5.0, keepalive=False)
        if tx_native:
            tx = run_native_sender(scfg, source, engine, start_at=time.monotonic() + 0.2)
        else:
            tx = run_sender(scfg, source).to_dict()
        t.join(30)
    finally:
        if engine is not None:
            engine.close()
    assert not isinstance(got.get("rx"), BaseException), got.get("rx")
    return tx, got["rx"][0]


PAIRINGS = [("udp", 1, 1), ("tcp", 1, 1), ("tcp", 3, 2), ("udp", 1, 3)]


@needs_binary
@pytest.mark.parametrize("transport,connections,split", PAIRINGS)
@pytest.mark.parametrize("tx_native,rx_native", [(True, False), (False, True), (True, True)],
                         ids=["native-to-python", "python-to-native", "native-to-native"])
def test_native_and_python_ends_talk_to_each_other(tmp_path, transport, connections, split, tx_native, rx_native):
    tx, rx = _pair(tmp_path, _free_port(), transport, connections, split, tx_native, rx_native)
    assert tx["status"] == "completed" and rx["status"] == "completed", (tx, rx)
    assert tx["packets"] == 150 and tx["rtp_packets"] == 150 * split
    assert rx["received_packets"] == 150 and rx["rtp_packets"] == 150 * split
    assert tx["receiver"]["received_packets"] == 150      # the summary came back over control
    if tx_native:
        assert tx["endpoint"] == "native" and tx["send_lateness_us"]["count"] == 150
    if rx_native:
        assert rx["endpoint"] == "native" and rx["recv_lag_us"]["count"] > 0
        assert rx["recv_time"] == ("kernel-rx-stamp" if transport == "udp" else "read")
    sent, received = read_records(tmp_path / "tx", "sent"), read_records(tmp_path / "rx", "received")
    assert sent.schema == pq.read_schema(next((tmp_path / "tx" / "sent").glob("part-*.parquet")))
    assert sent.column("seq").to_pylist() == list(range(150))
    assert set(sent.column("size_bytes").to_pylist()) == {200} and not any(sent.column("dropped").to_pylist())
    assert sorted(received.column("seq").to_pylist()) == list(range(150))
    # what arrived is what was sent, at the time the sender stamped in its header
    at = dict(zip(sent.column("seq").to_pylist(), sent.column("send_time_s").to_pylist()))
    assert [at[s] for s in received.column("seq").to_pylist()] == received.column("send_time_s").to_pylist()
    delay = received.column("recv_time_s").to_numpy() - received.column("send_time_s").to_numpy()
    assert (delay > 0).all() and (delay < 5.0).all()
    if connections > 1:
        assert sorted(set(received.column("connection").to_pylist())) == list(range(connections))
    # nothing of the native endpoint's is left in the run directories
    assert not list(tmp_path.rglob(".native-*"))


@needs_binary
def test_a_native_sender_writes_the_rows_a_python_sender_writes_for_the_same_source(tmp_path):
    """Frames included: the video-like source's frame ids, types and last-packet flags."""
    src = _frame_source()
    rows = {}
    for name, native in (("py", False), ("native", True)):
        tx, rx = _pair(tmp_path / name, _free_port(), "tcp", 1, 1, native, native, source=src, duration_s=1.0)
        assert tx["status"] == rx["status"] == "completed", (tx, rx)
        s = read_records(tmp_path / name / "tx", "sent")
        rows[name] = [tuple(r[c] for c in ("seq", "size_bytes", "frame_id", "frame_type", "frame_last", "dropped",
                                           "connection")) for r in s.to_pylist()]
    assert rows["py"] == rows["native"] and len(rows["py"]) > 20


def _frame_source():
    """A small source with frames: frame k of 3 packets every 40 ms, I every 5th frame."""
    from tcpdelay.traffic.source import Packet

    class Frames:
        name = "frames"
        nominal_interval_s = 0.04

        def packets(self, duration_s, seed=0):
            k = 0
            while (t := k * 0.04) < duration_s:
                for i in range(3):
                    yield Packet(t, 300 + 100 * i, k, "I" if k % 5 == 0 else "P", i == 2)
                k += 1

    return Frames()


# --------------------------------------------------------------------------- bad input


@needs_binary
@pytest.mark.parametrize("stdin,args,message", [
    (b"garbage\n", [], "a command that is not JSON"),
    (b'{"cmd":"fly"}\n', [], 'unknown command "fly"'),
    (b'{"cmd":"send","key":"tx:1","transport":"udp"}\n', [], "send tx:1: 0 sockets attached"),
    (b'{"cmd":"recv","key":"rx:1","transport":"quic"}\n', [], 'transport "quic"'),
    (b"", ["--spin-us", "x"], '--spin-us "x"'),
    (b"", ["--bogus"], 'unknown or incomplete argument "--bogus"'),
])
def test_bad_input_is_one_line_and_exit_status_2(stdin, args, message):
    p = subprocess.run([BINARY, *args], input=stdin, capture_output=True, timeout=10)
    assert p.returncode == 2, p
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcpdelay-endpoint: ") and message in lines[0], lines


@needs_binary
def test_a_bad_schedule_is_one_line_and_exit_status_2(tmp_path):
    import socket

    bad = tmp_path / "sched.bin"
    bad.write_bytes(b"\0" * 31)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    p = subprocess.Popen([BINARY], stdin=b, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    b.close()
    cmd = {"cmd": "send", "key": "tx:1", "flow_id": 1, "transport": "udp", "schedule": str(bad),
           "records": str(tmp_path / "r.raw"), "start_ns": 0, "split": 1, "keepalive": False, "interval_ns": 1,
           "keepalive_rtt_ns": 1, "max_queue_bytes": 1, "drain_timeout_ns": 1}
    socket.send_fds(a, [json.dumps(cmd).encode()], [u.fileno()])
    _, err = p.communicate(timeout=10)
    a.close()
    u.close()
    assert p.returncode == 2
    assert err.decode().splitlines() == [f"tcpdelay-endpoint: schedule {bad}: 31 B is not a whole number of 32-byte rows"]


@needs_binary
def test_the_endpoint_dies_with_the_thread_that_started_it():
    """PR_SET_PDEATHSIG: no endpoint outlives its parent (the kernel signals it when the thread
    that forked it ends)."""
    got = {}

    def start():
        got["engine"] = NativeEngine()

    t = threading.Thread(target=start)
    t.start()
    t.join()
    engine = got["engine"]
    assert engine.proc.wait(10) != 0
    assert "SIGTERM" in (engine.died or "") or engine.proc.returncode == 128 + signal.SIGTERM, engine.died


# --------------------------------------------------------------------------- on the testbed

SCENARIO = {"name": "native", "duration_s": 3.0, "seed": 5,
            "path": {"delay_s": 0.03, "rate_bps": 10e6, "queue_packets": 100},
            "access": {"rate_bps": 10e6, "delay_s": 0.005},
            "flows": [{"name": "voip", "profile": "voip", "transport": "udp", "count": 2},
                      {"name": "voiptcp", "profile": "voip"},
                      {"name": "par", "profile": "voip", "heuristics": {"connections": 2, "split": 2}},
                      {"name": "smart", "profile": "voip", "heuristics": {"connections": 2, "scheduler": "intelligent"}}]}


def _run(tmp: Path, endpoints: str, monkeypatch, scenario: dict = SCENARIO) -> Path:
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.scenario import parse_scenario

    monkeypatch.setenv(ENDPOINTS_ENV, endpoints)
    totals = run_scenario(parse_scenario(scenario), scenario["seed"], tmp)
    assert totals["errors"] == [], totals
    return tmp


def _layout(rd: Path) -> dict:
    kinds: dict[str, dict[str, set]] = {}
    for part in sorted(rd.glob("*/part-*.parquet")):
        writer = re.sub(r"-\d+\.parquet$", "", part.name)
        kinds.setdefault(part.parent.name, {}).setdefault(writer, set()).add(
            tuple((f.name, str(f.type)) for f in pq.read_schema(part)))
    return kinds


@needs_binary
@needs_testbed
@pytest.mark.testbed
@pytest.mark.slow
def test_a_native_run_writes_the_records_of_a_python_run(tmp_path, monkeypatch):
    """The same scenario on the grouped Python endpoints and on the native one: the same record
    parts and columns, the same packets sent per flow, every one received, each flow's least
    delay the path's within the emulator's precision; the flow the native endpoint does not serve
    (flow 4: the intelligent scheduler) ran on Python and run.json and environment.json say so."""
    py = _run(tmp_path / "python", "grouped", monkeypatch)
    nat = _run(tmp_path / "native", "native", monkeypatch)
    assert _layout(py) == _layout(nat)
    assert set(_layout(nat)) >= {"sent", "received", "tcp_state"}
    env = json.loads((nat / "environment.json").read_text())
    assert env["media_endpoints"] == "native" and env["native_endpoint"] == BINARY
    assert env["media_endpoints_python"] == {"4": "the intelligent scheduler over parallel connections (blind only)"}
    count = lambda rd, kind: np.bincount(read_records(rd, kind).column("flow_id").to_numpy(), minlength=5)  # noqa: E731
    assert list(count(py, "sent")) == list(count(nat, "sent"))
    assert list(count(py, "received")) == list(count(py, "sent")) == list(count(nat, "received"))
    media = json.loads((nat / "run.json").read_text())["run"]["media"]
    py_media = json.loads((py / "run.json").read_text())["run"]["media"]
    # every flow end answers as a Python one does (the same keys, and real time alike)
    assert [m["sender"]["realtime"] for m in media] == [m["sender"]["realtime"] for m in py_media]
    own = {"endpoint", "send_lateness_us"}     # (a Python sender may report its lateness too)
    assert [sorted(set(m["sender"]) - own) for m in media] == [sorted(set(m["sender"]) - own) for m in py_media]
    for m in media:
        native = m["flow_id"] != 4
        assert m["sender"]["status"] == "completed"
        assert (m["sender"].get("endpoint") == "native") == native, m["sender"]
        if native:
            assert m["sender"]["endpoint"] == "native"
            assert set(m["sender"]["send_lateness_us"]) == {"p99", "max", "count"}
            assert m["sender"]["send_lateness_us"]["count"] == count(nat, "sent")[m["flow_id"]]
            assert set(m["receiver"]["recv_lag_us"]) == {"p99", "max", "count"}
    # delays: no packet sooner than the path (5 + 30 + 5 ms and serialization on three 10-Mb/s
    # links), and each flow's least delay the same on both endpoints within 1 ms
    for rd in (py, nat):
        r = read_records(rd, "received")
        delay = r.column("recv_time_s").to_numpy() - r.column("send_time_s").to_numpy()
        excess = delay - (0.04 + 3 * r.column("size_bytes").to_numpy() * 8 / 10e6)
        assert (excess >= -50e-6).all(), (rd.name, excess.min())

    def least(rd):
        r = read_records(rd, "received")
        d = r.column("recv_time_s").to_numpy() - r.column("send_time_s").to_numpy()
        f = r.column("flow_id").to_numpy()
        return np.array([d[f == i].min() for i in range(5)])

    assert np.abs(least(py) - least(nat)).max() < 1e-3, (least(py), least(nat))


def _native_rx(cfg):
    engine = NativeEngine()
    try:
        return run_native_receiver(cfg, engine)
    finally:
        engine.close()


def _native_tx(cfg, source, start_at):
    engine = NativeEngine()
    try:
        return run_native_sender(cfg, source, engine, start_at=start_at)
    finally:
        engine.close()


def _pcap_deliveries(path: Path) -> dict[int, int]:
    """Media seq -> the emulator's delivery time (CLOCK_REALTIME ns) of each UDP media datagram."""
    data = path.read_bytes()
    magic = struct.unpack_from("<I", data, 0)[0]
    assert magic == 0xA1B23C4D, hex(magic)        # nanosecond pcap, little-endian (this machine)
    out, at = {}, 24
    while at + 16 <= len(data):
        sec, ns, cap, _ = struct.unpack_from("<IIII", data, at)
        pkt = data[at + 16:at + 16 + cap]
        at += 16 + cap
        if len(pkt) >= 48 and pkt[9] == 17 and pkt[29] & 0x7F == 96:     # IPv4, UDP, RTP media
            out[struct.unpack_from("!Q", pkt, 40)[0]] = sec * 1_000_000_000 + ns
    return out


@needs_binary
@needs_testbed
@pytest.mark.testbed
def test_the_kernel_receive_stamps_follow_the_emulators_delivery_times(tmp_path):
    """UDP: the native receiver records each datagram's kernel receive stamp (SO_TIMESTAMPING,
    moved onto CLOCK_MONOTONIC). The emulator writes each datagram it delivers into the
    receiving host's TUN and logs the instant in its pcap: no stamp precedes its delivery (beyond
    the two clocks' offset measurements, a few µs), and the typical stamp is the delivery's
    kernel work after it, not a scheduler's wake-up."""
    from tcpdelay.testbed import DirectionSpec, LinkSpec, Testbed, TestbedSpec

    pcap = tmp_path / "a_to_b.pcap"
    link = LinkSpec(a_to_b=DirectionSpec(delay_s=0.01, pcap_file=str(pcap)), b_to_a=DirectionSpec(delay_s=0.01))
    with Testbed(TestbedSpec(link=link)) as tb:
        left, right = tb.hosts["left0"], tb.hosts["right0"]
        rcfg = ReceiverConfig(listen_host=right.address, listen_port=7300, out_dir=str(tmp_path / "rx"), runs=1,
                              idle_timeout_s=20.0, udp_linger_s=0.5)
        rx = right.spawn(_native_rx, rcfg)
        time.sleep(0.5)
        scfg = SenderConfig(to_host=right.address, to_port=7300, out_dir=str(tmp_path / "tx"), run_id="stamps",
                            run=RunParams(transport="udp", duration_s=2.0, flow_id=3), keepalive=False)
        tx = left.call(_native_tx, scfg, CbrSource(160, 0.01), time.monotonic() + 0.5)
        got = rx.result(timeout_s=30)[0]
    assert tx["status"] == got["status"] == "completed" and got["received_packets"] == 200, (tx, got)
    offsets = []
    for _ in range(5):
        a = time.monotonic_ns()
        r = time.time_ns()
        b = time.monotonic_ns()
        offsets.append((b - a, r - (a + b) // 2))
    real_minus_mono = min(offsets)[1]
    delivered = _pcap_deliveries(pcap)
    r = read_records(tmp_path / "rx", "received")
    stamps = {s: round(t * 1e9) for s, t in zip(r.column("seq").to_pylist(), r.column("recv_time_s").to_pylist())}
    assert set(stamps) == set(delivered)
    after = np.array([stamps[s] - (delivered[s] - real_minus_mono) for s in stamps]) / 1e3   # µs
    assert after.min() > -50, after.min()
    assert np.median(after) < 1000, np.median(after)


@needs_binary
@needs_testbed
@pytest.mark.testbed
@pytest.mark.slow
def test_a_killed_native_endpoint_fails_the_run_naming_itself(tmp_path):
    f = tmp_path / "kill.toml"
    f.write_text('name = "native-kill"\nduration_s = 8\nseed = 3\n[path]\nrtt_s = 0.02\nrate_bps = 10e6\n'
                 'queue_packets = 100\n[[flows]]\nname = "voip"\nprofile = "voip"\ntransport = "udp"\ncount = 2\n')
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "tcpdelay", "run", str(f), "--out", str(out), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, ENDPOINTS_ENV: "native"})
    victim = None
    try:
        deadline = time.monotonic() + 60
        while victim is None and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            # once it has flushed rows (it writes every 0.2 s)
            if any(p.stat().st_size >= 40 for p in (out / "seed-3").glob("flows/*/.native-sent-*.raw")):
                victim = _endpoint_under(proc.pid, "tx")
            time.sleep(0.05)
        assert victim is not None, "no native sending endpoint found"
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, stderr
    error = json.loads(stdout)["failed"][0]["error"]
    assert f"the native endpoint tcpdelay-endpoint (pid {victim}) killed by SIGKILL" in error, error
    # what it had measured is kept: its raw records were converted, none left behind
    assert read_records(out / "seed-3", "sent").num_rows > 0
    assert not list(out.rglob(".native-*"))
    with pytest.raises(ProcessLookupError):
        os.kill(victim, 0)


def _endpoint_under(root: int, side: str) -> int | None:
    """The pid of a tcpdelay-endpoint descended from ``root`` whose open files include a raw
    ``sent`` (``tx``) record file."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    todo, mine = [root], []
    while todo:
        p = todo.pop()
        mine.append(p)
        todo += children.get(p, [])
    for p in mine:
        try:
            if Path(f"/proc/{p}/comm").read_text().strip() != "tcpdelay-endpoint"[:15]:
                continue
            if any(".native-sent-" in os.readlink(fd) for fd in Path(f"/proc/{p}/fd").iterdir()):
                return p
        except OSError:
            continue
    return None


@needs_binary
def test_a_stopped_native_sender_ends_early_and_keeps_what_it_sent(tmp_path):
    """The group's stop (SIGINT) sets ``stop`` and interrupts the endpoint's waiters: the flow
    ends long before its 20 s, "interrupted", its records so far kept and converted."""
    engine = NativeEngine()
    port = _free_port()
    rcfg = ReceiverConfig(listen_host="127.0.0.1", listen_port=port, out_dir=str(tmp_path / "rx"), runs=1,
                          idle_timeout_s=30.0)
    rx_stop = threading.Event()
    got = {}
    t = threading.Thread(target=lambda: got.update(rx=run_receiver(rcfg, stop=rx_stop)))
    t.start()
    try:
        time.sleep(0.3)
        stop = threading.Event()
        scfg = SenderConfig(to_host="127.0.0.1", to_port=port, out_dir=str(tmp_path / "tx"), run_id="stopped",
                            run=RunParams(transport="udp", duration_s=20.0, flow_id=2), keepalive=False)
        threading.Timer(1.5, lambda: (stop.set(), engine.interrupt())).start()
        t0 = time.monotonic()
        tx = run_native_sender(scfg, CbrSource(200, 0.01), engine, stop=stop, start_at=time.monotonic() + 0.2)
        took_s = time.monotonic() - t0
    finally:
        rx_stop.set()
        t.join(30)
        engine.close()
    assert tx["status"] == "interrupted" and took_s < 10.0, (tx["status"], took_s)
    sent = read_records(tmp_path / "tx", "sent")
    assert 0 < sent.num_rows == tx["packets"] < 2000
    assert not list(tmp_path.rglob(".native-*"))


@needs_binary
def test_a_corrupted_tcp_stream_fails_a_native_receivers_run_and_the_sender_is_told(tmp_path):
    """What came before the bad bytes is recorded; the run is "corrupted", the reason names the
    connection and what was wrong, and the sender gets an abort saying so (receiver.py's rules)."""
    from tcpdelay.transport import control, framing
    from tcpdelay.transport.sender import _connect_control, _offer_run, _open_tcp

    engine = NativeEngine()
    port = _free_port()
    rcfg = ReceiverConfig(listen_host="127.0.0.1", listen_port=port, out_dir=str(tmp_path / "rx"), runs=1,
                          idle_timeout_s=20.0)
    got = {}
    t = threading.Thread(target=lambda: got.update(rx=run_native_receiver(rcfg, engine)))
    t.start()
    try:
        time.sleep(0.3)
        cfg = SenderConfig(to_host="127.0.0.1", to_port=port, run_id="bad",
                           run=RunParams(transport="tcp", duration_s=5.0, flow_id=4))
        deadline = time.monotonic() + 10
        ctl = _connect_control(cfg, deadline)
        reply = _offer_run(ctl, cfg, cfg.run, "bad", deadline)
        media = _open_tcp(cfg, ctl.getpeername()[:2], 0, reply["token"], deadline)
        media.setblocking(True)
        good = framing.encode_media(flow_id=4, rtp_seq=0, rtp_timestamp=0, marker=True, seq=0,
                                    send_time_ns=time.monotonic_ns(), size_bytes=100)
        bad = bytearray(framing.encode_media(flow_id=4, rtp_seq=1, rtp_timestamp=0, marker=True, seq=1,
                                             send_time_ns=time.monotonic_ns(), size_bytes=100))
        bad[20] ^= 0xFF                                   # the send time altered: the check fails
        media.sendall(framing.frame(good) + framing.frame(bytes(bad)))
        abort, _ = control.recv(ctl, 10.0)
        t.join(30)
        media.close()
        ctl.close()
    finally:
        engine.close()
    rx = got["rx"][0]
    assert rx["status"] == "corrupted" and rx["received_packets"] == 1, rx
    assert rx["failure"].startswith("connection 0: header check ") and "corrupted or not tcpdelay media" in rx["failure"]
    assert abort["type"] == "abort" and abort["status"] == "corrupted" and abort["reason"] == rx["failure"]
    received = read_records(tmp_path / "rx", "received")
    assert received.column("seq").to_pylist() == [0]


@needs_binary
def test_a_silent_sender_ends_a_native_receivers_run_after_the_idle_timeout(tmp_path):
    """Media and control both silent for idle_timeout_s: "idle-timeout", as receiver.py says it
    (the endpoint reports the media's silence, the control loop its own)."""
    from tcpdelay.transport.sender import _connect_control, _offer_run, _open_tcp

    engine = NativeEngine()
    port = _free_port()
    rcfg = ReceiverConfig(listen_host="127.0.0.1", listen_port=port, out_dir=str(tmp_path / "rx"), runs=1,
                          idle_timeout_s=1.0)
    got = {}
    t = threading.Thread(target=lambda: got.update(rx=run_native_receiver(rcfg, engine)))
    t.start()
    try:
        time.sleep(0.3)
        cfg = SenderConfig(to_host="127.0.0.1", to_port=port, run_id="quiet",
                           run=RunParams(transport="tcp", duration_s=60.0, flow_id=6))
        deadline = time.monotonic() + 10
        ctl = _connect_control(cfg, deadline)
        reply = _offer_run(ctl, cfg, cfg.run, "quiet", deadline)
        media = _open_tcp(cfg, ctl.getpeername()[:2], 0, reply["token"], deadline)
        t.join(30)                      # nothing more is sent
        media.close()
        ctl.close()
    finally:
        engine.close()
    assert not t.is_alive()
    rx = got["rx"][0]
    assert rx["status"] == "idle-timeout" and rx["errors"] == ["nothing from the sender for 1 s"], rx
    assert rx["received_packets"] == 0 and rx["media_connections"] == 1
