"""Per-flow packet tables: the ``sent`` and ``received`` records of a run joined by
``(flow_id, seq)`` (:func:`flows_from_tables`, the one join; reading a run directory's records
into it is :func:`tcpdelay.results.packets.load_flows`).

Every metric module works on the arrays of a :class:`FlowPackets`. One row per packet the
source produced, in sequence order: its size, send time, receive time (NaN if it never reached
the application), and its frame. Conventions:

- **lost**: sent on the wire (not ``dropped`` by the sender) but never received;
- **dropped**: skipped by the sender (proactive drop), never on the wire;
- **missing** (for the application): lost or dropped;
- duplicates (a sequence number read twice) keep their first arrival and are counted.

When a run has no ``sent`` records (the receiver's directory of a run across real hosts, with
the sender's directory not given) the packets are inferred from the received sequence numbers as
RTP receivers do (RFC 3550 Appendix A.3: expected = highest - lowest + 1): packets missing in
between are lost, with unknown send time, and nothing is known of a loss after the last packet
received. ``FlowPackets.inferred`` says so.

Clocks: with ``run.json`` ``"clock": "unsynchronized"`` the send and receive times come from two
clocks; delays are then reported relative to the smallest delay of the run (as irtt does without
synchronized clocks) and flagged ``delay_relative``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tcpdelay.errors import ParameterError


@dataclass(frozen=True)
class FlowPackets:
    """One flow's packets in sequence order (arrays of equal length)."""

    flow_id: int
    seq: np.ndarray
    size_bytes: np.ndarray
    send_time_s: np.ndarray
    recv_time_s: np.ndarray
    """NaN where the packet never reached the application."""
    connection: np.ndarray
    frame_id: np.ndarray
    frame_type: np.ndarray
    frame_last: np.ndarray
    dropped: np.ndarray
    duplicates: int = 0
    unmatched_received: int = 0
    """Received packets with no sent record (e.g. the sender's last records lost to a crash);
    they are not in the arrays."""
    inferred: bool = False
    """True when there were no ``sent`` records and the packets come from the received sequence
    numbers alone."""
    clock_offset_s: float = 0.0
    """Subtracted from every delay: 0 with a shared clock, the run's smallest delay otherwise."""

    @property
    def received(self) -> np.ndarray:
        return ~np.isnan(self.recv_time_s)

    @property
    def lost(self) -> np.ndarray:
        return ~self.received & ~self.dropped

    @property
    def missing(self) -> np.ndarray:
        return ~self.received

    @property
    def delay_s(self) -> np.ndarray:
        """One-way delay per packet (NaN if not received), relative when clocks differ."""
        return self.recv_time_s - self.send_time_s - self.clock_offset_s

    @property
    def has_frames(self) -> bool:
        return bool(np.any(self.frame_id >= 0))

    def __len__(self) -> int:
        return int(self.seq.size)


def _np(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy(zero_copy_only=False)


def flows_from_tables(sent: pa.Table, received: pa.Table, *, unsynchronized: bool = False
                      ) -> list[FlowPackets]:
    """Join the two record tables into one :class:`FlowPackets` per flow (sorted by flow id)."""
    if received.num_rows == 0 and sent.num_rows == 0:
        return []
    r_flow, r_seq = _np(received, "flow_id").astype(np.int64), _np(received, "seq").astype(np.int64)
    r_recv = _np(received, "recv_time_s").astype(float)
    r_send = _np(received, "send_time_s").astype(float)
    r_conn = _np(received, "connection").astype(np.int64)
    r_size = _np(received, "size_bytes").astype(np.int64)
    # first arrival of each (flow, seq)
    order = np.lexsort((r_recv, r_seq, r_flow))
    r_flow, r_seq, r_recv, r_send, r_conn, r_size = (
        a[order] for a in (r_flow, r_seq, r_recv, r_send, r_conn, r_size))
    first = np.ones(r_seq.size, bool)
    first[1:] = (r_flow[1:] != r_flow[:-1]) | (r_seq[1:] != r_seq[:-1])
    dup_by_flow = {int(f): int(n) for f, n in zip(*np.unique(r_flow[~first], return_counts=True))}
    r_flow, r_seq, r_recv, r_send, r_conn, r_size = (
        a[first] for a in (r_flow, r_seq, r_recv, r_send, r_conn, r_size))

    flows: list[FlowPackets] = []
    if sent.num_rows:
        s_flow = _np(sent, "flow_id").astype(np.int64)
        for fid in np.unique(s_flow):
            m = s_flow == fid
            seq = _np(sent, "seq")[m].astype(np.int64)
            order = np.argsort(seq, kind="stable")
            seq = seq[order]
            if np.any(seq[1:] == seq[:-1]):
                raise ParameterError(f"sent records of flow {fid}: sequence numbers repeat")
            col = {n: _np(sent, n)[m][order] for n in
                   ("size_bytes", "send_time_s", "connection", "frame_id", "frame_type",
                    "frame_last", "dropped")}
            rm = r_flow == fid
            recv = np.full(seq.size, np.nan)
            conn = col["connection"].astype(np.int64)
            pos = np.searchsorted(seq, r_seq[rm])
            ok = (pos < seq.size) & (seq[np.minimum(pos, seq.size - 1)] == r_seq[rm])
            recv[pos[ok]] = r_recv[rm][ok]
            conn[pos[ok]] = r_conn[rm][ok]
            flows.append(FlowPackets(
                int(fid), seq, col["size_bytes"].astype(np.int64),
                col["send_time_s"].astype(float), recv, conn,
                col["frame_id"].astype(np.int64), col["frame_type"].astype(str),
                col["frame_last"].astype(bool), col["dropped"].astype(bool),
                duplicates=dup_by_flow.get(int(fid), 0),
                unmatched_received=int(np.count_nonzero(~ok))))
        extra = set(np.unique(r_flow).tolist()) - {f.flow_id for f in flows}
        if extra:
            raise ParameterError(f"received records of flow(s) {sorted(extra)} have no sent "
                                 "records (give the sender's records of the same run)")
    else:
        for fid in np.unique(r_flow):
            m = r_flow == fid
            lo, hi = int(r_seq[m].min()), int(r_seq[m].max())
            seq = np.arange(lo, hi + 1, dtype=np.int64)
            idx = r_seq[m] - lo
            n = seq.size
            recv = np.full(n, np.nan)
            send = np.full(n, np.nan)
            size = np.zeros(n, np.int64)
            conn = np.full(n, -1, np.int64)
            recv[idx], send[idx], size[idx], conn[idx] = r_recv[m], r_send[m], r_size[m], r_conn[m]
            flows.append(FlowPackets(
                int(fid), seq, size, send, recv, conn, np.full(n, -1, np.int64),
                np.full(n, "", dtype="<U1"), np.ones(n, bool), np.zeros(n, bool),
                duplicates=dup_by_flow.get(int(fid), 0), inferred=True))
    if unsynchronized:
        delays = np.concatenate([f.recv_time_s - f.send_time_s for f in flows])
        delays = delays[~np.isnan(delays)]
        if delays.size:
            offset = float(delays.min())
            flows = [_with_offset(f, offset) for f in flows]
    return flows


def _with_offset(f: FlowPackets, offset: float) -> FlowPackets:
    return dataclasses.replace(f, clock_offset_s=offset)
