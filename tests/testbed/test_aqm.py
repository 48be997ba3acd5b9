"""Active queue management at the emulated bottleneck (docs/emulator.md "Queue disciplines and
ECN", issue 29): one bulk Reno flow through 10 Mb/s with a 1000-packet limit. Drop-tail lets
the queue fill; CoDel (RFC 8289) keeps the sojourn time near its 5-ms target by dropping at
dequeue, and with ECN negotiated in the hosts' namespaces (``net.ipv4.tcp_ecn = 1``) and
``ecn = true`` on the discipline it marks CE instead: the kernel's TCP accepts the marked packets
(their IPv4 checksums rewritten by the emulator), reacts, and retransmits (almost) nothing."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time

import pytest

from tcpdelay.cli.testbed import build_spec_data
from tcpdelay.errors import ParameterError
from tcpdelay.link import CoDel, DirectionSpec, FqCoDel, LinkSpec
from tcpdelay.testbed import Testbed, TestbedSpec
from tcpdelay.testbed.spec import TcpSettings, parse_spec

TCPDELAY = [sys.executable, "-m", "tcpdelay"]

RATE_BPS, QUEUE_PACKETS, DELAY_S, SEND_S = 10e6, 1000, 0.01, 6.0
TCPI_OPT_ECN = 8


def receive(port: int) -> int:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    conn, _ = srv.accept()
    total = 0
    while chunk := conn.recv(1 << 16):
        total += len(chunk)
    conn.close()
    srv.close()
    return total


def send(address: str, port: int, seconds: float) -> dict:
    """Bulk Reno for ``seconds``; the sender's TCP_INFO at the end: whether ECN was negotiated
    (tcpi_options) and its total retransmissions."""
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"reno")
    for _ in range(100):
        try:
            s.connect((address, port))
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
            s.close()
            s = socket.socket()
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"reno")
    block = b"x" * 65536
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s.send(block)
    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    s.close()
    options = info[5]
    total_retrans = struct.unpack_from("I", info, 8 + 23 * 4)[0]
    return {"ecn": bool(options & TCPI_OPT_ECN), "total_retrans": total_retrans}


def bulk(aqm, tcp_ecn: int) -> tuple[dict, dict]:
    """The bottleneck's a_to_b counters and the sender's TCP_INFO after one bulk flow."""
    forward = DirectionSpec(rate_bps=RATE_BPS, queue_packets=QUEUE_PACKETS, delay_s=DELAY_S, aqm=aqm)
    spec = TestbedSpec.dumbbell(link=LinkSpec(a_to_b=forward, b_to_a=DirectionSpec(delay_s=DELAY_S)),
                                tcp=TcpSettings(ecn=tcp_ecn))
    with Testbed(spec) as tb:
        rx = tb.hosts["right0"].spawn(receive, 5001)
        tcp = tb.hosts["left0"].call(send, tb.hosts["right0"].address, 5001, SEND_S, timeout_s=60)
        assert rx.result(60) > RATE_BPS / 8  # more than a second's worth arrived
        counters = tb.link_counters()["a_to_b"]
    return counters, tcp


def probe_receive(port: int, seconds: float) -> list[float]:
    """One-way delays (s) of the probes arriving within ``seconds`` (the namespaces share
    CLOCK_MONOTONIC, so the sender's timestamp is comparable)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.5)
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data = s.recv(64)
        except TimeoutError:
            continue
        out.append((time.monotonic_ns() - struct.unpack("Q", data[:8])[0]) / 1e9)
    return out


def probe_send(address: str, port: int, seconds: float, every_s: float = 0.02) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    n, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        s.sendto(struct.pack("Q", time.monotonic_ns()) + b"p" * 92, (address, port))
        n += 1
        time.sleep(every_s)
    return n


def sparse_beside_bulk(aqm) -> list[float]:
    """One-way delays of a sparse UDP flow (100-B datagrams every 20 ms) sharing the bottleneck
    with a bulk Reno flow, over the last 4 s of 6 (after slow start)."""
    forward = DirectionSpec(rate_bps=RATE_BPS, queue_packets=QUEUE_PACKETS, delay_s=DELAY_S, aqm=aqm)
    spec = TestbedSpec.dumbbell(link=LinkSpec(a_to_b=forward, b_to_a=DirectionSpec(delay_s=DELAY_S)))
    with Testbed(spec) as tb:
        left, right = tb.hosts["left0"], tb.hosts["right0"]
        rx = right.spawn(receive, 5001)
        bulk_tx = left.spawn(send, right.address, 5001, SEND_S)
        time.sleep(SEND_S - 4.0)
        probes = right.spawn(probe_receive, 6000, 4.2)
        time.sleep(0.1)
        assert left.call(probe_send, right.address, 6000, 4.0, timeout_s=30) > 100
        delays = probes.result(30)
        bulk_tx.result(60)
        rx.result(60)
    return delays


@pytest.mark.testbed
def test_fq_codel_isolates_a_sparse_flow_from_a_bulk_flow():
    """RFC 8290 §1.3/§4.2: a sparse flow's packets go ahead of the bulk flow's backlog, so they
    see (nearly) only the propagation delay, where CoDel's one FIFO makes them wait its standing
    queue (about its target) and drop-tail its full buffer."""
    import numpy as np

    fq = np.median(sparse_beside_bulk(FqCoDel()))
    codel = np.median(sparse_beside_bulk(CoDel()))
    tail = np.median(sparse_beside_bulk(None))
    print("sparse flow's median one-way delay: fq_codel", fq, "codel", codel, "drop-tail", tail)
    assert fq < codel < tail
    assert fq - DELAY_S < (codel - DELAY_S) / 2


@pytest.mark.testbed
def test_codel_keeps_the_queue_short_and_ecn_marks_instead_of_dropping():
    tail, tail_tcp = bulk(None, 0)
    codel, codel_tcp = bulk(CoDel(), 0)
    ecn, ecn_tcp = bulk(CoDel(ecn=True), 1)
    print("drop-tail", tail["sojourn_ms"], tail["drops"], tail_tcp)
    print("codel", codel["sojourn_ms"], codel["drops"], codel["ce_marks"], codel_tcp)
    print("codel+ecn", ecn["sojourn_ms"], ecn["drops"], ecn["ce_marks"], ecn_tcp)
    assert tail["queue_discipline"] == "drop_tail" and codel["queue_discipline"] == "codel"
    # drop-tail: the flow fills the buffer (a 1000-packet queue is 1.2 s at 10 Mb/s)
    assert tail["peak_queue_packets"] > 500 and tail["drops"]["aqm"] == 0 and tail["ce_marks"] == 0
    # CoDel without ECN: drops of its own, no marks; the queue far shorter than drop-tail's
    assert codel["drops"]["aqm"] > 0 and codel["ce_marks"] == 0 and not codel_tcp["ecn"]
    for q in ("p50", "p90", "p99"):
        assert codel["sojourn_ms"][q] < tail["sojourn_ms"][q] / 5, q
        assert ecn["sojourn_ms"][q] < tail["sojourn_ms"][q] / 5, q
    assert codel["drops"]["queue"] == 0 and ecn["drops"]["queue"] == 0
    # with ECN: negotiated, marked instead of dropped, (almost) no retransmissions
    assert ecn_tcp["ecn"] and ecn["ce_marks"] > 0
    assert ecn["drops"]["aqm"] <= ecn["ce_marks"] / 10
    assert ecn_tcp["total_retrans"] <= codel_tcp["total_retrans"] / 5
    assert ecn["packets_out"] > 0.8 * codel["packets_out"]


def test_up_flags_choose_the_discipline_and_turn_ecn_on_in_the_hosts():
    spec = parse_spec(build_spec_data(None, None, None, None, None, None, 10e6, 100, None, None, None, None, None,
                                      queue_discipline="fq_codel", ecn=True))
    for d in (spec.link.a_to_b, spec.link.b_to_a):
        assert d.aqm == FqCoDel(ecn=True) and d.queue_packets == 100
    assert all(h.tcp.ecn == 1 for h in spec.hosts)
    assert spec.link.a_to_b.settings()["aqm"] == {"discipline": "fq_codel", "target_s": 0.005, "interval_s": 0.1,
                                                  "quantum_bytes": 1514, "flows": 1024, "ecn": True}
    plain = parse_spec(build_spec_data(None, None, None, None, None, None, None, None, None, None, None, None, None))
    assert plain.link.a_to_b.aqm is None and "aqm" not in plain.link.a_to_b.settings()
    with pytest.raises(ParameterError, match="needs an AQM discipline"):
        build_spec_data(None, None, None, None, None, None, None, None, None, None, None, None, None, ecn=True)


@pytest.mark.parametrize("args, message", [
    (["--ecn"], "--ecn: needs an AQM discipline (codel, fq_codel or pie)"),
    (["--queue-discipline", "red"], "--queue-discipline: 'red' is not one of 'drop_tail', 'codel', 'fq_codel', 'pie'"),
])
def test_up_refuses_bad_discipline_flags_in_one_line(args, message):
    proc = subprocess.run(TCPDELAY + ["testbed", "up", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


@pytest.mark.testbed
def test_cli_up_with_codel_and_ecn_runs_the_discipline():
    up = subprocess.run(TCPDELAY + ["testbed", "up", "--rate-bps", "1e6", "--queue-packets", "50",
                                    "--queue-discipline", "codel", "--ecn", "--json"],
                        capture_output=True, text=True, timeout=90)
    assert up.returncode == 0, up.stderr
    tb = json.loads(up.stdout)
    rid = tb["run_id"]
    try:
        assert all(h["tcp"]["ecn"] == 1 for h in tb["hosts"].values())
        st = subprocess.run(TCPDELAY + ["testbed", "status", rid, "--json"], capture_output=True, text=True, timeout=90)
        assert st.returncode == 0, st.stderr
        (run,) = json.loads(st.stdout)["runs"]
        assert run["counters"]["a_to_b"]["queue_discipline"] == "codel"
    finally:
        down = subprocess.run(TCPDELAY + ["testbed", "down", rid, "--json"], capture_output=True, text=True, timeout=90)
    assert down.returncode == 0, down.stderr


def test_a_scenarios_path_aqm_reaches_the_emulators_file():
    from tcpdelay.experiments.run import plan_run
    from tcpdelay.experiments.scenario import parse_scenario
    from tcpdelay.testbed.emulator import emulator_config

    sc = parse_scenario({"duration_s": 5, "flows": [{"name": "a", "profile": "voip", "tcp": {"ecn": 1}}],
                         "path": {"rtt_s": 0.1, "rate_bps": 1e6, "queue_packets": 100,
                                  "aqm": {"discipline": "pie", "ecn": True}, "reverse": {"aqm": {"discipline": "drop_tail"}}}})
    spec = plan_run(sc, 1).testbed_spec(1)
    config = emulator_config(spec, ("ns-a", "tun-a"), ("ns-b", "tun-b"), "/state")
    assert config["a_to_b"]["aqm"] == {"discipline": "pie", "target_s": 0.015, "t_update_s": 0.015, "max_burst_s": 0.15,
                                       "alpha": 0.125, "beta": 1.25, "ecn": True}
    assert config["b_to_a"]["aqm"] == {"discipline": "drop_tail"}
    assert 1 in [h.tcp.ecn for h in spec.hosts]
    with pytest.raises(ParameterError, match=r"path\.aqm"):
        parse_scenario({"duration_s": 5, "flows": [{"profile": "voip"}], "path": {"aqm": {"discipline": "red"}}})


@pytest.mark.testbed
def test_a_scenario_run_with_path_aqm_runs_codel_and_reads_ecn_back(tmp_path):
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.scenario import parse_scenario

    sc = parse_scenario({"name": "aqm", "duration_s": 3,
                         "path": {"rtt_s": 0.05, "rate_bps": 2e6, "queue_packets": 200,
                                  "forward": {"aqm": {"discipline": "codel", "ecn": True}}},
                         "flows": [{"name": "v", "profile": "voip", "transport": "tcp", "tcp": {"ecn": 1}}],
                         "cross": [{"kind": "bulk", "count": 1}]})
    run_scenario(sc, 1, tmp_path)
    counters = json.loads((tmp_path / "run.json").read_text())["run"]["link_counters"]
    assert counters["a_to_b"]["queue_discipline"] == "codel" and counters["b_to_a"]["queue_discipline"] == "drop_tail"
    assert counters["a_to_b"]["sojourn_ms"]["count"] > 0
    env = json.loads((tmp_path / "environment.json").read_text())
    hosts = env["testbed"]["hosts"]
    assert 1 in [h["tcp"]["ecn"] for h in hosts.values()], hosts
