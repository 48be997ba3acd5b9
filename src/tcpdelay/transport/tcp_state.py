"""A TCP socket's state as the kernel sees it: ``TCP_INFO`` and the unsent send-queue size.

:func:`tcp_info` parses ``struct tcp_info`` of ``include/uapi/linux/tcp.h`` with
:mod:`struct` (native alignment, as the kernel lays it out), as far as the running kernel fills
it in: older kernels return a shorter struct and the missing fields are ``None``. Times are
converted to seconds (the kernel reports microseconds or milliseconds), rates to bit/s.

:func:`unsent_bytes` is ``ioctl(SIOCOUTQNSD)``: bytes written but not yet sent (the backlog a
real-time sender cares about, Brosh et al. §8.1); :func:`unacked_bytes` is ``SIOCOUTQ``
(written and not yet acknowledged, sent or not).
"""

from __future__ import annotations

import array
import fcntl
import socket
import struct
from dataclasses import dataclass, fields

from tcpdelay.errors import ParameterError

TCP_INFO = getattr(socket, "TCP_INFO", 11)
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
SIOCINQ = 0x541B       # FIONREAD: bytes readable
SIOCOUTQ = 0x5411      # TIOCOUTQ: bytes not yet acknowledged (sent or not)
SIOCOUTQNSD = 0x894B   # bytes not yet sent

#: struct tcp_info, in kernel order: (field, struct code). Bitfields are read as whole bytes.
_LAYOUT: list[tuple[str, str]] = [
    ("state", "B"), ("ca_state", "B"), ("retransmits", "B"), ("probes", "B"), ("backoff", "B"),
    ("options", "B"), ("wscale", "B"), ("app_limited_flags", "B"),
    ("rto_us", "I"), ("ato_us", "I"), ("snd_mss", "I"), ("rcv_mss", "I"),
    ("unacked", "I"), ("sacked", "I"), ("lost", "I"), ("retrans", "I"), ("fackets", "I"),
    ("last_data_sent_ms", "I"), ("last_ack_sent_ms", "I"), ("last_data_recv_ms", "I"), ("last_ack_recv_ms", "I"),
    ("pmtu", "I"), ("rcv_ssthresh", "I"), ("rtt_us", "I"), ("rttvar_us", "I"), ("snd_ssthresh", "I"),
    ("snd_cwnd", "I"), ("advmss", "I"), ("reordering", "I"),
    ("rcv_rtt_us", "I"), ("rcv_space", "I"), ("total_retrans", "I"),
    ("pacing_rate_Bps", "Q"), ("max_pacing_rate_Bps", "Q"), ("bytes_acked", "Q"), ("bytes_received", "Q"),
    ("segs_out", "I"), ("segs_in", "I"),
    ("notsent_bytes", "I"), ("min_rtt_us", "I"), ("data_segs_in", "I"), ("data_segs_out", "I"),
    ("delivery_rate_Bps", "Q"),
    ("busy_time_us", "Q"), ("rwnd_limited_us", "Q"), ("sndbuf_limited_us", "Q"),
    ("delivered", "I"), ("delivered_ce", "I"),
    ("bytes_sent", "Q"), ("bytes_retrans", "Q"), ("dsack_dups", "I"), ("reord_seen", "I"),
    ("rcv_ooopack", "I"), ("snd_wnd", "I"), ("rcv_wnd", "I"), ("rehash", "I"),
    ("total_rto", "H"), ("total_rto_recoveries", "H"), ("total_rto_time_ms", "I"),
    ("received_ce", "I"), ("delivered_e1_bytes", "I"), ("delivered_e0_bytes", "I"),
    ("delivered_ce_bytes", "I"), ("received_e1_bytes", "I"), ("received_e0_bytes", "I"),
    ("received_ce_bytes", "I"), ("accecn_fail_mode", "H"), ("accecn_opt_seen", "H"),
]


def _prefix_sizes() -> list[tuple[int, str]]:
    """For each field count n: the struct size that holds the first n fields, and its format."""
    out, fmt = [], "@"
    for _, code in _LAYOUT:
        fmt += code
        out.append((struct.calcsize(fmt), fmt))
    return out


_PREFIXES = _prefix_sizes()
TCP_INFO_MAX_BYTES = 512  # more than any kernel's struct tcp_info so far

CA_STATES = {0: "open", 1: "disorder", 2: "cwr", 3: "recovery", 4: "loss"}
TCP_STATES = {1: "established", 2: "syn_sent", 3: "syn_recv", 4: "fin_wait1", 5: "fin_wait2",
              6: "time_wait", 7: "close", 8: "close_wait", 9: "last_ack", 10: "listen", 11: "closing",
              12: "new_syn_recv"}


@dataclass(frozen=True)
class TcpInfo:
    """The fields of ``TCP_INFO`` the toolkit uses, in SI units (``None``: kernel too old).

    ``cwnd_segments``, ``ssthresh_segments`` (``None`` while still "infinite"), ``rtt_s`` and
    ``rttvar_s`` (smoothed RTT estimator of RFC 6298), ``min_rtt_s``, ``rto_s``; ``ca_state``
    (``open``/``disorder``/``cwr``/``recovery``/``loss``), ``retransmits`` (consecutive RTOs of
    the current loss episode), ``total_retrans`` (segments retransmitted over the connection),
    ``lost``/``sacked``/``unacked`` (segments now), ``notsent_bytes``; the raw dict in ``raw``.
    """

    state: str
    ca_state: str
    retransmits: int
    total_retrans: int
    cwnd_segments: int
    ssthresh_segments: int | None
    rtt_s: float
    rttvar_s: float
    min_rtt_s: float | None
    rto_s: float
    snd_mss_bytes: int
    unacked_segments: int
    sacked_segments: int
    lost_segments: int
    notsent_bytes: int | None
    bytes_acked: int | None
    bytes_received: int | None
    bytes_retrans: int | None
    delivery_rate_bps: float | None
    pacing_rate_bps: float | None
    snd_wnd_bytes: int | None
    total_rto: int | None
    raw: dict

    def to_dict(self, with_raw: bool = False) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "raw"}
        if with_raw:
            d["raw"] = dict(self.raw)
        return d


def tcp_info_raw(sock: socket.socket) -> dict:
    """``struct tcp_info`` as a dict of kernel field names (units as in the kernel)."""
    buf = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_MAX_BYTES)
    n = 0
    while n < len(_PREFIXES) and _PREFIXES[n][0] <= len(buf):
        n += 1
    if n == 0:
        raise ParameterError(f"TCP_INFO returned {len(buf)} bytes; is this a TCP socket?")
    size, fmt = _PREFIXES[n - 1]
    values = struct.unpack(fmt, buf[:size])
    return {name: v for (name, _), v in zip(_LAYOUT, values)}


def tcp_info(sock: socket.socket) -> TcpInfo:
    """The socket's ``TCP_INFO`` as a :class:`TcpInfo`."""
    r = tcp_info_raw(sock)
    g = r.get
    us = lambda k: None if g(k) is None else g(k) / 1e6  # noqa: E731
    bps = lambda k: None if g(k) is None or g(k) == 2**64 - 1 else g(k) * 8.0  # noqa: E731
    ssthresh = r["snd_ssthresh"]
    return TcpInfo(
        state=TCP_STATES.get(r["state"], str(r["state"])),
        ca_state=CA_STATES.get(r["ca_state"], str(r["ca_state"])),
        retransmits=r["retransmits"],
        total_retrans=r["total_retrans"],
        cwnd_segments=r["snd_cwnd"],
        ssthresh_segments=None if ssthresh >= 0x7FFFFFFF else ssthresh,
        rtt_s=r["rtt_us"] / 1e6,
        rttvar_s=r["rttvar_us"] / 1e6,
        min_rtt_s=None if g("min_rtt_us") in (None, 0xFFFFFFFF) else r["min_rtt_us"] / 1e6,
        rto_s=r["rto_us"] / 1e6,
        snd_mss_bytes=r["snd_mss"],
        unacked_segments=r["unacked"],
        sacked_segments=r["sacked"],
        lost_segments=r["lost"],
        notsent_bytes=g("notsent_bytes"),
        bytes_acked=g("bytes_acked"),
        bytes_received=g("bytes_received"),
        bytes_retrans=g("bytes_retrans"),
        delivery_rate_bps=bps("delivery_rate_Bps"),
        pacing_rate_bps=bps("pacing_rate_Bps"),
        snd_wnd_bytes=g("snd_wnd"),
        total_rto=g("total_rto"),
        raw=r,
    )


def _ioctl_int(sock: socket.socket, request: int) -> int:
    buf = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), request, buf, True)
    return int(buf[0])


def unsent_bytes(sock: socket.socket) -> int:
    """Bytes in the send queue not yet sent (``SIOCOUTQNSD``)."""
    return _ioctl_int(sock, SIOCOUTQNSD)


def unacked_bytes(sock: socket.socket) -> int:
    """Bytes in the send queue not yet acknowledged, sent or not (``SIOCOUTQ``)."""
    return _ioctl_int(sock, SIOCOUTQ)


def readable_bytes(sock: socket.socket) -> int:
    """Bytes received and not yet read (``SIOCINQ``)."""
    return _ioctl_int(sock, SIOCINQ)


def congestion_control(sock: socket.socket) -> str:
    """The congestion control the socket uses now (``TCP_CONGESTION``)."""
    return sock.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).split(b"\0", 1)[0].decode()


def set_congestion_control(sock: socket.socket, name: str) -> None:
    """Set ``TCP_CONGESTION`` and check that it took.

    In a testbed host whose routes carry ``congctl`` (see :mod:`tcpdelay.testbed.tcp_settings`)
    the route's algorithm replaces the socket's at connect(); set it after connect() there.
    """
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, name.encode())
    except OSError as err:
        raise ParameterError(f"congestion control {name!r} cannot be set on this socket: {err.strerror}") from None
    got = congestion_control(sock)
    if got != name:
        raise ParameterError(f"congestion control {name!r} did not take; the socket uses {got!r}")


__all__ = [
    "TcpInfo", "tcp_info", "tcp_info_raw", "unsent_bytes", "unacked_bytes", "readable_bytes",
    "congestion_control", "set_congestion_control", "CA_STATES", "SIOCOUTQNSD",
]
