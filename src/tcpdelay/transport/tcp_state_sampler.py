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

from tcpdelay.records import RecordWriter
from tcpdelay.transport.cc_state import CcStateMap
from tcpdelay.transport.tcp_state import tcp_info_raw

_NO_RATE = 2**64 - 1
_INFINITE_SSTHRESH = 0x7FFFFFFF


def tcp_state_row(sock: socket.socket, flow_id: int, connection: int, time_s: float,
                  cc_map: CcStateMap | None = None) -> dict:
    """One ``tcp_state`` record of ``sock`` now (raises OSError if the socket is gone)."""
    r = tcp_info_raw(sock)
    g = r.get
    ss = r["snd_ssthresh"]
    rate = lambda k: None if g(k) in (None, _NO_RATE) else g(k) * 8.0  # noqa: E731
    cc = cc_map.read(sock.fileno()) if cc_map is not None else None
    cc = cc or (None, None, None, None)
    return dict(flow_id=flow_id, connection=connection, time_s=time_s,
                cwnd_segments=r["snd_cwnd"], ssthresh_segments=None if ss >= _INFINITE_SSTHRESH else ss,
                srtt_s=r["rtt_us"] / 1e6, rttvar_s=r["rttvar_us"] / 1e6,
                delivery_rate_bps=rate("delivery_rate_Bps"), retransmits_total=r["total_retrans"],
                ca_state=r["ca_state"], bytes_acked=g("bytes_acked"), mss_bytes=r["snd_mss"],
                pacing_rate_bps=rate("pacing_rate_Bps"),
                cc_state_0=cc[0], cc_state_1=cc[1], cc_state_2=cc[2], cc_state_3=cc[3])


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
        for flow_id, conn, sock in socks:
            try:
                row = tcp_state_row(sock, flow_id, conn, t, self.cc_map)
            except OSError:
                continue      # closed or reset: the loop reports that, not the sampler
            self.writer.append(**row)
            self.rows += 1
        nxt = self.next_ns + self.period_ns if self.next_ns else now_ns + self.period_ns
        self.next_ns = nxt if nxt > now_ns else now_ns + self.period_ns
