"""Per-connection socket knobs of the delay-friendly guidelines of
Brosh et al., "The Delay-Friendliness of TCP for Real-Time Traffic", §8.1.

:class:`TcpOptions` names what a media connection sets on its socket, each with the system call
that applies it (``setsockopt(2)``, tcp(7), socket(7)):

- ``nodelay`` — TCP_NODELAY, on by default: Nagle's algorithm (RFC 896; RFC 1122 §4.2.3.4)
  holds small writes back until earlier data is acknowledged, which Brosh et al. (§3, §8.1) say
  a real-time sender must disable. Set it to False to measure what Nagle costs.
- ``congestion`` — TCP_CONGESTION, the congestion control of this connection (reno, cubic,
  bbr, ... as the kernel allows).
- ``notsent_lowat_bytes`` — TCP_NOTSENT_LOWAT: the socket reports writable only while less
  than this much unsent data is queued, which bounds the backlog in the kernel.
- ``sndbuf_bytes`` / ``rcvbuf_bytes`` — SO_SNDBUF / SO_RCVBUF (the kernel doubles the value
  and turns autotuning off for that buffer). §8.1 advises a large receive buffer.

After applying, :func:`read_back` reports what the kernel actually uses, which is what a run
records (a request the kernel clamps is visible there).
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass

from tcpdelay.errors import ParameterError
from tcpdelay.transport.tcp_state import congestion_control, set_congestion_control

TCP_NOTSENT_LOWAT = getattr(socket, "TCP_NOTSENT_LOWAT", 25)


@dataclass(frozen=True)
class TcpOptions:
    nodelay: bool = True
    congestion: str | None = None
    notsent_lowat_bytes: int | None = None
    sndbuf_bytes: int | None = None
    rcvbuf_bytes: int | None = None

    def __post_init__(self):
        for name in ("notsent_lowat_bytes", "sndbuf_bytes", "rcvbuf_bytes"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and 1 <= value <= 2**31 - 1):
                raise ParameterError(f"{name}: {value!r} must be an integer in [1, 2**31-1]")
        if self.congestion is not None and not (
                isinstance(self.congestion, str) and 0 < len(self.congestion) < 16
                and self.congestion.isascii() and self.congestion.replace("_", "").isalnum()):
            raise ParameterError(f"congestion: {self.congestion!r} is not a congestion-control name")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TcpOptions":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


def _allowed_congestion() -> str:
    try:
        with open("/proc/sys/net/ipv4/tcp_allowed_congestion_control") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def apply_buffers(sock: socket.socket, opts: TcpOptions) -> None:
    """SO_SNDBUF/SO_RCVBUF; call before connect/listen so the window scale fits them."""
    if opts.sndbuf_bytes is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, opts.sndbuf_bytes)
    if opts.rcvbuf_bytes is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, opts.rcvbuf_bytes)


def apply_tcp(sock: socket.socket, opts: TcpOptions) -> None:
    """TCP_NODELAY, TCP_NOTSENT_LOWAT and the buffers: call before connect().

    The congestion control is set by :func:`apply_congestion` *after* connect(), because in a
    testbed host a route's ``congctl`` replaces the socket's choice at connect()."""
    apply_buffers(sock, opts)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1 if opts.nodelay else 0)
    if opts.notsent_lowat_bytes is not None:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, opts.notsent_lowat_bytes)


def apply_congestion(sock: socket.socket, opts: TcpOptions) -> None:
    """TCP_CONGESTION (checked that it took), after connect()."""
    if opts.congestion is None:
        return
    try:
        set_congestion_control(sock, opts.congestion)
    except ParameterError as err:
        raise ParameterError(f"{err}; allowed here: {_allowed_congestion()}") from None


def read_back(sock: socket.socket) -> dict:
    """What the kernel uses on this socket (buffer sizes as getsockopt reports them)."""
    out = {
        "sndbuf_bytes": sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        "rcvbuf_bytes": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
    }
    if sock.type == socket.SOCK_STREAM:
        out["nodelay"] = bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        out["congestion"] = congestion_control(sock)
        out["notsent_lowat_bytes"] = sock.getsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT)
    return out
