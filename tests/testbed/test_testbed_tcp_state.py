"""TCP_INFO parsing and send-queue ioctls on real loopback TCP connections."""

import socket

import pytest

from tcpdelay.errors import ParameterError
from tcpdelay.transport import tcp_state


@pytest.fixture
def pair():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    c = socket.create_connection(srv.getsockname())
    s, _ = srv.accept()
    srv.close()
    yield c, s
    c.close()
    s.close()


def test_layout_matches_the_kernel_header_offsets():
    # Offsets of linux/tcp.h: the u64 block starts at 104, tcpi_bytes_sent at 200 (kernel >= 4.19).
    names = [n for n, _ in tcp_state._LAYOUT]
    size_before = lambda name: tcp_state._PREFIXES[names.index(name) - 1][0]  # noqa: E731
    assert size_before("pacing_rate_Bps") == 104
    assert size_before("notsent_bytes") == 144
    assert size_before("bytes_sent") == 200
    assert size_before("snd_wnd") == 228


def test_fresh_connection_reports_established_open_and_small_rtt(pair):
    c, _ = pair
    c.sendall(b"x" * 1000)
    info = tcp_state.tcp_info(c)
    assert info.state == "established"
    assert info.ca_state == "open"
    assert info.cwnd_segments >= 1
    assert 0 < info.rtt_s < 0.1
    assert info.total_retrans == 0
    assert info.ssthresh_segments is None  # still "infinite" before any loss
    assert info.rto_s >= 0.2  # Linux's minimum RTO


def test_unsent_bytes_counts_the_backlog_behind_a_stalled_receiver(pair):
    c, s = pair
    c.setblocking(False)
    written = 0
    try:
        while True:
            written += c.send(b"y" * 65536)
    except BlockingIOError:
        pass
    unsent = tcp_state.unsent_bytes(c)
    unacked = tcp_state.unacked_bytes(c)
    info = tcp_state.tcp_info(c)
    assert unsent > 0
    assert unacked >= unsent  # SIOCOUTQ counts sent-but-unacked data too
    assert info.notsent_bytes == unsent  # TCP_INFO and SIOCOUTQNSD agree
    assert unacked <= written
    assert 0 < tcp_state.readable_bytes(s) <= written - unsent


def test_congestion_control_set_and_read_back(pair):
    c, _ = pair
    avail = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    for name in avail:
        tcp_state.set_congestion_control(c, name)
        assert tcp_state.congestion_control(c) == name
    with pytest.raises(ParameterError, match="cannot be set"):
        tcp_state.set_congestion_control(c, "nosuchcc")


def test_udp_socket_is_rejected_with_one_line():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with pytest.raises(OSError):
        tcp_state.tcp_info(u)
    u.close()
