"""Steady-state TCP throughput models.

References
----------
.. [PFTK] J. Padhye, V. Firoiu, D. Towsley, J. Kurose, "Modeling TCP Throughput: A Simple
   Model and its Empirical Validation", SIGCOMM 1998 — eqs (17), (19), (22), (23) as restated
   by Cardwell, Savage, Anderson, "Modeling TCP Latency", INFOCOM 2000.
.. [RFC5348] S. Floyd et al., "TCP Friendly Rate Control (TFRC): Protocol Specification",
   RFC 5348, Section 3.1 (the simplified PFTK throughput equation).
.. [Mathis] M. Mathis, J. Semke, J. Mahdavi, T. Ott, "The Macroscopic Behavior of the TCP
   Congestion Avoidance Algorithm", CCR 1997: sqrt(3/(2b)) * MSS / (RTT * sqrt(p)).

All functions take scalars or arrays (broadcast together) and return segments per second;
multiply by ``8 * mss_bytes`` for bits per second (:func:`segments_to_bps`).
Loss ``p`` is the per-segment loss-event probability in [0, 1). ``b`` is the number of segments
acknowledged per ACK (2 with delayed ACKs). ``w_max`` is the receiver-window limit in segments
(``inf`` for none). With ``p == 0`` the throughput is ``w_max / rtt`` (inf when unlimited).
"""

from __future__ import annotations

import numpy as np

from tcpdelay import checks


LINUX_RTO_MIN_S = 0.2
"""Linux's floor on the RTT-variance term of the RTO (``TCP_RTO_MIN``, 200 ms)."""


def default_t0_s(rtt_s):
    """The default average first timeout T0 = RTT + 200 ms.

    Linux computes RTO = SRTT + max(4·RTTVAR, TCP_RTO_MIN) (``tcp_set_rto``; the 1 s floor
    of RFC 6298 §2.4 is not applied), so on a path with little RTT variance a Linux sender
    settles at RTT + 200 ms. (Cardwell et al. and a known public implementation use 2·RTT or
    4·RTT; both understate the RTO on short paths.)
    """
    rtt = checks.positive("rtt_s", rtt_s)
    return (rtt + LINUX_RTO_MIN_S)[()]


def _one_minus_q_pow(p: np.ndarray, k) -> np.ndarray:
    """1 - (1-p)**k, accurate for small p."""
    return -np.expm1(k * np.log1p(-p))


def timeout_probability(p, w):
    """Q(p, w): probability that a loss in a window of ``w`` segments is detected by timeout.

    PFTK eq (17) as printed in Cardwell et al. eq (17)::

        Q = min(1, (1 - (1-p)^3) (1 + (1-p)^3 (1 - (1-p)^(w-3))) / (1 - (1-p)^w))

    The p -> 0 limit, min(1, 3/w), is used at p == 0.
    """
    p = checks.probability("loss", p)
    w = checks.at_least("window", w, 1.0)
    p, w = np.broadcast_arrays(p, w)
    safe = np.where(p > 0, p, 0.5)
    with np.errstate(over="ignore", invalid="ignore"):
        num = _one_minus_q_pow(safe, 3.0) * (1.0 + (1.0 - safe) ** 3 * _one_minus_q_pow(safe, w - 3.0))
        q = num / _one_minus_q_pow(safe, w)
    q = np.where(np.isfinite(w), q, np.where(p > 0, num / 1.0, 0.0))  # w = inf: denominator -> 1
    q = np.where(p > 0, q, np.minimum(1.0, 3.0 / w))
    return np.minimum(1.0, q)[()]


def timeout_backoff_factor(p):
    """G(p) = 1 + p + 2p^2 + 4p^3 + 8p^4 + 16p^5 + 32p^6 (eq 19): the cost of back-to-back
    timeouts with exponential backoff, in units of T0, up to the 64·T0 cap."""
    p = checks.probability("loss", p)
    # Horner form of the same polynomial (array powers are slow).
    return (1 + p * (1 + p * (2 + p * (4 + p * (8 + p * (16 + 32 * p))))))[()]


def expected_loss_window(p, b=1):
    """W(p), the expected congestion window (segments) at a loss event in congestion
    avoidance, eq (23)::

        W(p) = (2+b)/(3b) + sqrt( 8(1-p)/(3 b p) + ((2+b)/(3b))^2 )

    Note the grouping: the first term is (2+b) over (3b) — not 2 + b/(3b) — and it appears
    again squared under the root. inf at p == 0.
    """
    p = checks.probability("loss", p)
    b = checks.at_least("acks_per_segment", b, 1.0)
    c = (2.0 + b) / (3.0 * b)
    # sqrt(A/p + c^2) computed as sqrt(A + c^2 p) / sqrt(p): no overflow for subnormal p.
    with np.errstate(divide="ignore"):
        return (c + np.sqrt(8.0 * (1.0 - p) / (3.0 * b) + c * c * p) / np.sqrt(p))[()]


def pftk_segments_per_s(p, rtt_s, t0_s, b=1, w_max=np.inf):
    """Full PFTK steady-state throughput R(p, RTT, T0, W_max) in segments/s, eq (22).

    If W(p) < W_max::

        R = ((1-p)/p + W/2 + Q(p,W)) / (RTT (b W/2 + 1) + Q(p,W) G(p) T0 / (1-p))

    otherwise (window-limited)::

        R = ((1-p)/p + Wm/2 + Q(p,Wm)) / (RTT (b Wm/8 + (1-p)/(p Wm) + 2) + Q(p,Wm) G(p) T0/(1-p))
    """
    p = checks.probability("loss", p)
    rtt = checks.positive("rtt_s", rtt_s)
    t0 = checks.positive("t0_s", t0_s)
    b = checks.at_least("acks_per_segment", b, 1.0)
    wm = checks.at_least("max_window", w_max, 1.0, allow_inf=True)
    p, rtt, t0, b, wm = np.broadcast_arrays(p, rtt, t0, b, wm)

    lossy = p > 0
    ps = np.where(lossy, p, 0.5)  # placeholder where p == 0, replaced below
    w_p = expected_loss_window(ps, b)
    g = timeout_backoff_factor(ps)
    limited = w_p >= wm

    # Numerator and denominator are both multiplied by p, so that (1-p)/p cannot overflow for
    # tiny (even subnormal) p; the ratio is eq (22) unchanged.
    w_free = w_p
    q_free = timeout_probability(ps, np.maximum(w_free, 1.0))  # W(p) < 1 for large b and p
    r_free = ((1 - ps) + ps * (w_free / 2 + q_free)) / (
        rtt * (ps * (b * w_free / 2 + 1)) + ps * q_free * g * t0 / (1 - ps)
    )

    if limited.any():
        wm_f = np.where(np.isfinite(wm), wm, 1.0)
        q_lim = timeout_probability(ps, wm_f)
        r_lim = ((1 - ps) + ps * (wm_f / 2 + q_lim)) / (
            rtt * (ps * (b * wm_f / 8 + 2) + (1 - ps) / wm_f) + ps * q_lim * g * t0 / (1 - ps)
        )
        r = np.where(limited, r_lim, r_free)
    else:
        r = r_free
    r = np.where(lossy, r, wm / rtt)  # p == 0: window-limited rate, inf if unlimited
    return r[()]


def pftk_simple_segments_per_s(p, rtt_s, t0_s, b=1):
    """The simplified PFTK equation TFRC uses (RFC 5348 §3.1), in segments/s::

        X = 1 / (R sqrt(2 b p / 3) + t_RTO (3 sqrt(3 b p / 8) p (1 + 32 p^2)))
    """
    p = checks.probability("loss", p)
    rtt = checks.positive("rtt_s", rtt_s)
    t0 = checks.positive("t0_s", t0_s)
    b = checks.at_least("acks_per_segment", b, 1.0)
    with np.errstate(divide="ignore"):
        return (1.0 / (rtt * np.sqrt(2 * b * p / 3) + t0 * (3 * np.sqrt(3 * b * p / 8) * p * (1 + 32 * p**2))))[()]


def mathis_segments_per_s(p, rtt_s, b=1):
    """Mathis et al.: sqrt(3 / (2 b)) / (RTT sqrt(p)) segments/s (no timeouts, no window cap)."""
    p = checks.probability("loss", p)
    rtt = checks.positive("rtt_s", rtt_s)
    b = checks.at_least("acks_per_segment", b, 1.0)
    with np.errstate(divide="ignore"):
        return (np.sqrt(3.0 / (2.0 * b)) / (rtt * np.sqrt(p)))[()]


def segments_to_bps(segments_per_s, mss_bytes):
    """Segments/s -> bits/s of payload for segments of ``mss_bytes``."""
    mss = checks.positive("mss_bytes", mss_bytes)
    return (np.asarray(segments_per_s, dtype=float) * mss * 8.0)[()]
