"""A measured bulk TCP transfer (iperf-like) for tests and benchmarks of a path: a sender that
writes as fast as TCP lets it (:func:`send`) and a sink (:func:`receive`), each returning its
byte counts, goodput and TCP state.

Not cross traffic of a scenario (that is :mod:`tcpdelay.traffic.bulk`, a download from the
shared response server); this one probes a path: its capacity, its RTT under load, its queue.
Plain sockets; run each end inside a host, e.g. with :meth:`tcpdelay.testbed.Host.spawn`::

    rx = tb.hosts["right0"].spawn(bulk_transfer.receive, 5001)
    tx = tb.hosts["left0"].call(bulk_transfer.send, tb.hosts["right0"].address, 5001, duration_s=3)
    print(rx.result()["goodput_bps"], tx["samples"][-1]["rtt_s"])

The sender samples ``TCP_INFO`` as it goes (:mod:`tcpdelay.transport.tcp_state`).
"""

from __future__ import annotations

import errno
import socket
import time

from tcpdelay.transport import tcp_state

CHUNK_BYTES = 256 * 1024


def receive(port: int, *, accept_timeout_s: float = 10.0, rcvbuf_bytes: int | None = None) -> dict:
    """Accept one connection on ``port``, read until the peer closes; return byte counts and timing."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if rcvbuf_bytes:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(accept_timeout_s)
    conn, peer = srv.accept()
    srv.close()
    conn.settimeout(None)
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    total, first, last = 0, None, None
    while True:
        n = conn.recv_into(view)
        if n == 0:
            break
        now = time.monotonic()
        if first is None:
            first = now
        last = now
        total += n
    info = tcp_state.tcp_info(conn).to_dict()
    conn.close()
    span = (last - first) if first is not None and last > first else 0.0
    return {"bytes": total, "peer": peer[0], "duration_s": span,
            "goodput_bps": total * 8 / span if span > 0 else 0.0, "tcp_info": info}


def connect(dst: str, port: int, *, timeout_s: float = 10.0, congestion_control: str | None = None,
            sndbuf_bytes: int | None = None) -> socket.socket:
    """Connect, retrying while the receiver is not yet listening; set the congestion control after
    connect() (so that it wins over a route's ``congctl``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if sndbuf_bytes:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf_bytes)
        s.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            s.connect((dst, port))
            break
        except OSError as err:
            s.close()
            if err.errno not in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH) \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    s.settimeout(None)
    if congestion_control:
        tcp_state.set_congestion_control(s, congestion_control)
    return s


def send(dst: str, port: int, *, duration_s: float = 3.0, size_bytes: int | None = None,
         congestion_control: str | None = None, sample_interval_s: float = 0.05,
         sndbuf_bytes: int | None = None) -> dict:
    """Send for ``duration_s`` (or ``size_bytes``), sampling TCP_INFO every ``sample_interval_s``."""
    s = connect(dst, port, congestion_control=congestion_control, sndbuf_bytes=sndbuf_bytes)
    payload = memoryview(b"\x5a" * CHUNK_BYTES)
    start = time.monotonic()
    next_sample, sent, samples = start, 0, []
    s.settimeout(0.05)  # bounded sends, so sampling keeps its pace when the window is full
    while True:
        now = time.monotonic()
        if now >= next_sample:
            i = tcp_state.tcp_info(s)
            samples.append({"t_s": now - start, "rtt_s": i.rtt_s, "cwnd_segments": i.cwnd_segments,
                            "total_retrans": i.total_retrans, "ca_state": i.ca_state,
                            "unsent_bytes": tcp_state.unsent_bytes(s), "bytes_acked": i.bytes_acked})
            next_sample = now + sample_interval_s
        if size_bytes is not None:
            if sent >= size_bytes:
                break
        elif now - start >= duration_s:
            break
        want = CHUNK_BYTES if size_bytes is None else min(CHUNK_BYTES, size_bytes - sent)
        try:
            sent += s.send(payload[:want])
        except (socket.timeout, BlockingIOError):
            continue
    elapsed = time.monotonic() - start
    s.settimeout(60.0)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # wait for the receiver to close: everything was delivered and acknowledged
    info = tcp_state.tcp_info(s)  # final: counts every retransmission of the transfer
    s.close()
    return {"bytes": sent, "duration_s": elapsed, "congestion_control": congestion_control,
            "tcp_info": info.to_dict(), "samples": samples}
