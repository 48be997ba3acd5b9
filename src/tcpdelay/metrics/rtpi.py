"""Real-Time Performance Index, delayed packets rate and packet loss rate (Papadimitriou and
Tsaoussidis, *On Transport Layer Mechanisms for Real-Time QoS*, JMM 2005, §3.2, Algorithm 1).

Algorithm 1 marks a received packet *delayed* when its inter-arrival time, the time since the
previous packet arrived, exceeds a threshold (100 ms in the paper); the first packet is timely.
Then

- timely packets = packets received - delayed packets,
- Real-Time Performance Index = timely packets / packets sent (<= 1),
- Delayed Packets Rate = delayed packets / packets sent,
- Packet Loss Rate = lost packets / packets sent,

so RTPI = 1 - Delayed Packets Rate - Packet Loss Rate. The paper's pseudocode indexes the
previous arrival by sequence number (``packetTime[i-1]``); without loss or reordering that is the
previous arrival. After a loss the packet ``i - 1`` has no arrival time, so we take the previous
packet *in order of arrival*, i.e. the gap the application actually waited.

The paper's MPEG sources never pause. For a source with silences (VoIP talk spurts) every first
packet after a silence longer than the threshold would count as delayed; given the send times and
the nominal packet interval, the time the source itself was silent (send gap beyond one interval)
is taken off the inter-arrival time. For a source that never pauses this changes nothing.
"""

from __future__ import annotations

import numpy as np

from tcpdelay import checks

DEFAULT_THRESHOLD_S = 0.100


def delayed_mask(recv_time_s, threshold_s: float = DEFAULT_THRESHOLD_S, *, send_time_s=None,
                 nominal_interval_s: float | None = None) -> np.ndarray:
    """For each received packet (NaN entries are not received and are False), whether its
    inter-arrival time exceeds ``threshold_s``. With ``send_time_s`` (one per packet, in sequence
    order like ``recv_time_s``) and ``nominal_interval_s`` the source's own silences between the
    two arrivals (send gaps beyond one interval) are taken off the inter-arrival time."""
    checks.positive("threshold_s", threshold_s)
    r = np.asarray(recv_time_s, dtype=float)
    ok = np.flatnonzero(np.isfinite(r))
    out = np.zeros(r.shape, bool)
    if ok.size < 2:
        return out
    order = ok[np.argsort(r[ok], kind="stable")]
    gaps = np.diff(r[order])
    if send_time_s is not None and nominal_interval_s is not None:
        checks.non_negative("nominal_interval_s", nominal_interval_s)
        # silence of the source: send gaps beyond one interval between consecutive packets in
        # sequence order (lost ones included, so a loss is not mistaken for a silence),
        # accumulated; the silence between two arrivals is the difference of the sums
        s = np.asarray(send_time_s, dtype=float)
        step = np.maximum(0.0, np.diff(s) - nominal_interval_s)
        cum = np.concatenate([[0.0], np.cumsum(np.where(np.isfinite(step), step, 0.0))])
        gaps = gaps - np.maximum(0.0, np.diff(cum[order]))
    out[order[1:]] = gaps > threshold_s
    return out


def real_time_performance(recv_time_s, n_sent: int, threshold_s: float = DEFAULT_THRESHOLD_S,
                          *, send_time_s=None, nominal_interval_s: float | None = None) -> dict:
    """RTPI and its parts for one flow; ``recv_time_s`` has one entry per packet sent (NaN if
    lost), ``n_sent`` the packets sent by the protocol (normally ``len(recv_time_s)``);
    ``send_time_s``/``nominal_interval_s`` discount the source's silences (see
    :func:`delayed_mask`)."""
    r = np.asarray(recv_time_s, dtype=float)
    n_sent = int(n_sent)
    received = int(np.count_nonzero(np.isfinite(r)))
    delayed = int(np.count_nonzero(delayed_mask(r, threshold_s, send_time_s=send_time_s,
                                                nominal_interval_s=nominal_interval_s)))
    lost = n_sent - received
    if n_sent <= 0:
        return {"threshold_s": threshold_s, "sent": 0, "received": received, "timely": 0,
                "delayed": delayed, "rtpi": None, "delayed_packets_rate": None,
                "packet_loss_rate": None}
    return {"threshold_s": threshold_s, "sent": n_sent, "received": received,
            "timely": received - delayed, "delayed": delayed,
            "rtpi": (received - delayed) / n_sent,
            "delayed_packets_rate": delayed / n_sent,
            "packet_loss_rate": lost / n_sent}
