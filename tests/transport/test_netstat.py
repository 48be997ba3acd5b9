"""The namespace's TCP recovery counters (tcpdelay.transport.netstat) read from the real /proc."""

import socket

from tcpdelay.transport import netstat


def test_reads_this_namespace_counters():
    c = netstat.tcp_counters()
    for name in ("TCPLossProbes", "TCPSackRecovery", "TCPTimeouts", "RetransSegs"):
        assert name in c and c[name] >= 0


def test_counts_a_loopback_connection_and_deltas():
    before = netstat.tcp_counters()
    srv = socket.create_server(("127.0.0.1", 0))
    cli = socket.create_connection(srv.getsockname())
    conn, _ = srv.accept()
    cli.sendall(b"x" * 10000)
    got = 0
    while got < 10000:
        got += len(conn.recv(65536))
    for s in (cli, conn, srv):
        s.close()
    d = netstat.counter_delta(before, netstat.tcp_counters())
    assert set(d) == set(before)
    assert all(v >= 0 for v in d.values())       # counters only grow


def test_missing_proc_gives_empty(tmp_path):
    assert netstat.tcp_counters(tmp_path) == {}
    (tmp_path / "netstat").write_text("TcpExt: TCPLossProbes TCPTimeouts\nTcpExt: 4 2\n")
    (tmp_path / "snmp").write_text("Tcp: RtoAlgorithm RetransSegs\nTcp: 1 9\n")
    assert netstat.tcp_counters(tmp_path) == {"TCPLossProbes": 4, "TCPTimeouts": 2, "RetransSegs": 9}
    assert netstat.counter_delta({"RetransSegs": 3}, {"RetransSegs": 9, "X": 1}) == {"RetransSegs": 6}
