"""QUIC's state over time: the sender's congestion window, RTT estimate, bytes in flight, losses
and probe timeouts every ``period_s``, as ``quic_state`` records (tcp_state's counterpart).

aioquic keeps RFC 9002's variables in its ``QuicPacketRecovery`` (``conn._loss``): the
congestion window and bytes in flight (§7), ``smoothed_rtt``/``rttvar``/``min_rtt`` (§5.3)
and ``pto_count`` (§6.2.1, consecutive PTOs since the last acknowledgement). It counts neither
lost packets nor PTOs over a connection, so :func:`instrument` wraps the two methods where they
happen (``_on_packets_lost``, ``on_loss_detection_timeout``) on that one object and counts.
Columns and units: :data:`tcpdelay.records.QUIC_STATE_SCHEMA` (docs/transports-quic.md).
"""

from __future__ import annotations

from tcpdelay.records import QUIC_STATE_SCHEMA, RecordWriter


class QuicCounters:
    """Lost packets (RFC 9002 §6.1, all packet number spaces) and PTO expiries (§6.2) of one
    connection so far."""

    def __init__(self):
        self.lost_packets = 0
        self.ptos = 0


def instrument(conn) -> QuicCounters:
    """Count ``conn``'s lost packets and PTOs (an aioquic QuicConnection)."""
    counters = QuicCounters()
    loss = conn._loss
    on_lost = loss._on_packets_lost
    on_timeout = loss.on_loss_detection_timeout

    def _on_packets_lost(*args, **kwargs):
        # aioquic also "loses" the packets a PTO resends (congestion_event False, recovery.py
        # reschedule_data); those are counted as PTOs, not as losses.
        if kwargs.get("congestion_event", True):
            counters.lost_packets += len(list(kwargs.get("packets", ())))
        return on_lost(*args, **kwargs)

    def on_loss_detection_timeout(*args, **kwargs):
        before = loss._pto_count
        out = on_timeout(*args, **kwargs)
        counters.ptos += loss._pto_count - before
        return out

    loss._on_packets_lost = _on_packets_lost
    loss.on_loss_detection_timeout = on_loss_detection_timeout
    return counters


def quic_state_values(conn, counters: QuicCounters, flow_id: int, time_s: float) -> tuple:
    """One ``quic_state`` record of ``conn`` now, in the schema's column order."""
    loss = conn._loss
    cc = loss._cc
    ss = getattr(cc, "ssthresh", None)
    min_rtt = loss._rtt_min
    return (flow_id, 0, time_s, int(cc.congestion_window), None if ss is None else int(ss),
            int(loss.bytes_in_flight), loss._rtt_smoothed if loss._rtt_initialized else None,
            loss._rtt_variance if loss._rtt_initialized else None,
            None if min_rtt == float("inf") else min_rtt, counters.lost_packets,
            counters.ptos, int(loss._pto_count))


def quic_state_row(conn, counters: QuicCounters, flow_id: int, time_s: float) -> dict:
    return dict(zip(QUIC_STATE_SCHEMA.names, quic_state_values(conn, counters, flow_id, time_s)))


class QuicStateSampler:
    """Samples one QUIC connection every ``period_s`` into ``writer`` (kind ``quic_state``);
    the sending loop asks :meth:`due_ns` when to wake, as with
    :class:`~tcpdelay.transport.tcp_state_sampler.TcpStateSampler`."""

    def __init__(self, writer: RecordWriter, period_s: float, conn, counters: QuicCounters, flow_id: int):
        if not period_s > 0:
            raise ValueError(f"period_s: {period_s} must be > 0")
        self.writer, self.conn, self.counters, self.flow_id = writer, conn, counters, flow_id
        self.period_ns = int(period_s * 1e9)
        self.next_ns = 0
        self.rows = 0

    def due_ns(self) -> int:
        return self.next_ns

    def sample(self, now_ns: int) -> None:
        if now_ns < self.next_ns:
            return
        self.writer.extend([quic_state_values(self.conn, self.counters, self.flow_id, now_ns / 1e9)])
        self.rows += 1
        nxt = self.next_ns + self.period_ns if self.next_ns else now_ns + self.period_ns
        self.next_ns = nxt if nxt > now_ns else now_ns + self.period_ns
