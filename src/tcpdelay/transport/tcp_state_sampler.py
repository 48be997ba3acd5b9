"""TCP state over time: each connection's ``TCP_INFO`` every ``period_s``, as ``tcp_state`` records.

A :class:`TcpStateSampler` belongs to a sending loop (the media sender's selector loop, the bulk
cross-traffic server's): the loop asks :meth:`TcpStateSampler.due_ns` when to wake and calls
:meth:`TcpStateSampler.sample` then, so 80 flows cost 80 ``getsockopt`` calls per period and no
thread. Columns and units: :data:`tcpdelay.records.TCP_STATE_SCHEMA` (docs/metrics.md,
"TCP state over time"). With a :class:`~tcpdelay.transport.cc_state.CcStateMap` the four values
a tcpdelay BPF congestion control publishes are read too (``cc_state_0..3``; NULL otherwise).
"""

from __future__ import annotations

import socket
import struct

from tcpdelay.records import TCP_STATE_SCHEMA, RecordWriter
from tcpdelay.transport.cc_state import CcStateMap
from tcpdelay.transport.tcp_state import _LAYOUT, TCP_INFO, TCP_INFO_MAX_BYTES, tcp_info_raw

_NO_RATE = 2**64 - 1
_INFINITE_SSTHRESH = 0x7FFFFFFF

# The fast path: struct tcp_info up to delivery_rate (Linux >= 4.9) in one precompiled unpack,
# and the positions of the fields a sample keeps (tcp_info_raw's dict of every field costs
# several times the getsockopt itself; 80 flows every 10 ms add up).
_UPTO = [name for name, _ in _LAYOUT].index("delivery_rate_Bps") + 1
_FAST = struct.Struct("@" + "".join(code for _, code in _LAYOUT[:_UPTO]))
_AT = {name: i for i, (name, _) in enumerate(_LAYOUT[:_UPTO])}
_I = tuple(_AT[k] for k in ("ca_state", "snd_mss", "rtt_us", "rttvar_us", "snd_ssthresh", "snd_cwnd",
                            "total_retrans", "pacing_rate_Bps", "bytes_acked", "delivery_rate_Bps"))


def _fields(sock: socket.socket) -> tuple:
    """(ca_state, snd_mss, rtt_us, rttvar_us, snd_ssthresh, snd_cwnd, total_retrans,
    pacing_rate_Bps, bytes_acked, delivery_rate_Bps) of the socket's TCP_INFO (None: kernel too old)."""
    buf = sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, TCP_INFO_MAX_BYTES)
    if len(buf) >= _FAST.size:
        v = _FAST.unpack_from(buf)
        return tuple(v[i] for i in _I)
    r = tcp_info_raw(sock)
    return tuple(r.get(k) for k in ("ca_state", "snd_mss", "rtt_us", "rttvar_us", "snd_ssthresh", "snd_cwnd",
                                    "total_retrans", "pacing_rate_Bps", "bytes_acked", "delivery_rate_Bps"))


def tcp_state_values(sock: socket.socket, flow_id: int, connection: int, time_s: float,
                     cc_map: CcStateMap | None = None) -> tuple:
    """One ``tcp_state`` record of ``sock`` now, as a tuple in the schema's column order
    (raises OSError if the socket is gone)."""
    ca, mss, rtt, rttvar, ss, cwnd, retrans, pacing, acked, delivery = _fields(sock)
    cc = cc_map.read(sock.fileno()) if cc_map is not None else None
    cc = cc or (None, None, None, None)
    return (flow_id, connection, time_s, cwnd, None if ss >= _INFINITE_SSTHRESH else ss,
            rtt / 1e6, rttvar / 1e6, None if delivery in (None, _NO_RATE) else delivery * 8.0,
            retrans, ca, acked, mss, None if pacing in (None, _NO_RATE) else pacing * 8.0, *cc)


def tcp_state_row(sock: socket.socket, flow_id: int, connection: int, time_s: float,
                  cc_map: CcStateMap | None = None) -> dict:
    """One ``tcp_state`` record of ``sock`` now, by column name."""
    return dict(zip(TCP_STATE_SCHEMA.names, tcp_state_values(sock, flow_id, connection, time_s, cc_map)))


class TcpStateSampler:
    """Samples a set of TCP sockets every ``period_s`` into ``writer`` (kind ``tcp_state``).

    ``period_s`` > 0. Times are ``time.monotonic_ns()`` (the run's clock); a late wake-up
    samples once and schedules the next sample a period after it (no burst of catch-up rows).
    """

    def __init__(self, writer: RecordWriter, period_s: float, cc_map: CcStateMap | None = None):
        if not period_s > 0:
            raise ValueError(f"period_s: {period_s} must be > 0")
        self.writer = writer
        self.period_ns = int(period_s * 1e9)
        self.cc_map = cc_map
        self.next_ns = 0          # sample at the first call
        self.rows = 0

    def due_ns(self) -> int:
        """When the next sample is due (monotonic ns)."""
        return self.next_ns

    def sample(self, socks: list[tuple[int, int, socket.socket]], now_ns: int) -> None:
        """Sample ``(flow_id, connection, socket)`` each if due at ``now_ns``."""
        if now_ns < self.next_ns:
            return
        t = now_ns / 1e9
        rows = []
        for flow_id, conn, sock in socks:
            try:
                rows.append(tcp_state_values(sock, flow_id, conn, t, self.cc_map))
            except OSError:
                continue      # closed or reset: the loop reports that, not the sampler
        self.writer.extend(rows)
        self.rows += len(rows)
        nxt = self.next_ns + self.period_ns if self.next_ns else now_ns + self.period_ns
        self.next_ns = nxt if nxt > now_ns else now_ns + self.period_ns
