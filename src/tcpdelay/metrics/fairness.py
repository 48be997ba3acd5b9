"""Goodput and Jain's fairness index across flows (Papadimitriou and Tsaoussidis, *On Transport
Layer Mechanisms for Real-Time QoS*, JMM 2005, §3.2; the index of Chiu and Jain, *Analysis of
the increase/decrease algorithms for congestion avoidance in computer networks*, 1989)."""

from __future__ import annotations

import math

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError
from tcpdelay.traffic.source import RTP_HEADER_BYTES


def goodput_bps(size_bytes, recv_time_s, duration_s: float | None = None, *,
                header_bytes: int = RTP_HEADER_BYTES, start_s: float | None = None) -> float:
    """Goodput = original data delivered / connection time (§3.2).

    Original data counts each packet received once, without its ``header_bytes`` RTP header
    (protocol overhead; retransmissions never appear twice in the records). The connection time
    is ``duration_s`` (the run's duration) or, by default, the time from the first to the last
    arrival. With ``start_s`` (when the connection began, on the arrival clock) only what arrived
    within ``[start_s, start_s + duration_s]`` is delivered in the connection time: a backlog
    delivered after the run's end (a TCP flow offered more than its share) does not count, as in
    a simulation that stops at its end time. NaN ``recv_time_s`` marks a packet not received.
    """
    r = np.asarray(recv_time_s, dtype=float)
    sizes = np.asarray(size_bytes, dtype=float)
    ok = np.isfinite(r)
    if start_s is not None and duration_s is not None and math.isfinite(start_s):
        ok &= r <= start_s + duration_s
    data = float(np.sum(np.maximum(sizes[ok] - header_bytes, 0)))
    if duration_s is None:
        if np.count_nonzero(ok) < 2:
            return float("nan")
        duration_s = float(r[ok].max() - r[ok].min())
        if duration_s <= 0:
            return float("nan")
    else:
        checks.positive("duration_s", duration_s)
    return data * 8 / duration_s


def jain_index(throughputs) -> float:
    """``(sum x_i)^2 / (n * sum x_i^2)``: 1 when all flows get the same, 1/n when one gets all.
    NaN for no flows or all zero."""
    x = np.asarray(throughputs, dtype=float)
    if np.any(~np.isfinite(x)) or np.any(x < 0):
        raise ParameterError("throughputs: must be finite and >= 0")
    if x.size == 0 or not np.any(x > 0):
        return float("nan")
    return float(x.sum() ** 2 / (x.size * np.sum(x * x)))
