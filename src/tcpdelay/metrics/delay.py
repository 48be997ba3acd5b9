"""Delay, late packets, interarrival jitter and loss of one flow.

- Delay statistics: mean, standard deviation, percentiles and maximum of the one-way delay of
  the packets received.
- Late fraction as a function of the playout delay (Brosh et al., *The Delay-Friendliness of TCP
  for Real-Time Traffic*, §6.6): with a fixed playout delay ``d`` measured from the send time, a
  received packet is *late* when its delay exceeds ``d``; a packet that never arrives misses its
  deadline too. Both fractions are over the packets sent.
- Interarrival jitter of RFC 3550 §6.4.1 (estimator of Appendix A.8), in seconds.
- Loss rates (see :mod:`tcpdelay.metrics.packets` for lost / dropped / missing).
"""

from __future__ import annotations

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError

DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)


def delay_stats(delay_s, percentiles=DEFAULT_PERCENTILES) -> dict:
    """``{"count", "mean_s", "std_s", "min_s", "max_s", "p50_s", ...}`` over the finite delays
    (NaN entries, i.e. packets not received, are ignored). The std is the population standard
    deviation (ddof=0). With no delays every statistic is None."""
    d = np.asarray(delay_s, dtype=float)
    d = d[np.isfinite(d)]
    pct = [float(p) for p in percentiles]
    for p in pct:
        if not 0 <= p <= 100:
            raise ParameterError(f"percentile: {p:g} is outside [0, 100]")
    keys = [_pkey(p) for p in pct]
    if d.size == 0:
        return {"count": 0, "mean_s": None, "std_s": None, "min_s": None, "max_s": None,
                **{k: None for k in keys}}
    values = np.percentile(d, pct) if pct else []
    return {"count": int(d.size), "mean_s": float(d.mean()), "std_s": float(d.std()),
            "min_s": float(d.min()), "max_s": float(d.max()),
            **{k: float(v) for k, v in zip(keys, values)}}


def _pkey(p: float) -> str:
    return f"p{p:g}_s".replace(".", "_")


def late_fraction(delay_s, playout_delay_s, *, n_sent: int | None = None) -> np.ndarray:
    """Fraction of packets whose delay exceeds each playout delay.

    ``delay_s``: one entry per packet sent, NaN for a packet never received (it is not counted
    late: see :func:`miss_fraction`). ``n_sent`` overrides the denominator (default
    ``len(delay_s)``). Returns an array shaped like ``playout_delay_s``.
    """
    d = np.asarray(delay_s, dtype=float)
    n = d.size if n_sent is None else int(n_sent)
    pd = checks.as_array("playout_delay_s", playout_delay_s)
    if n == 0:
        return np.full(pd.shape, np.nan)
    recv = np.sort(d[np.isfinite(d)])
    late = recv.size - np.searchsorted(recv, pd, side="right")  # delay > d strictly
    return late / n


def miss_fraction(delay_s, playout_delay_s, *, n_sent: int | None = None) -> np.ndarray:
    """Fraction of packets that miss their playout deadline: late or never received."""
    d = np.asarray(delay_s, dtype=float)
    n = d.size if n_sent is None else int(n_sent)
    lost = int(np.count_nonzero(~np.isfinite(d)))
    pd = checks.as_array("playout_delay_s", playout_delay_s)
    if n == 0:
        return np.full(pd.shape, np.nan)
    return late_fraction(d, pd, n_sent=n) + lost / n


def playout_delay_for_late_fraction(delay_s, target: float, *, n_sent: int | None = None
                                    ) -> float:
    """Smallest playout delay whose :func:`late_fraction` is <= ``target`` (packets never
    received are not late, so this is finite whenever a packet arrived; NaN when none did).
    When every packet may be late it is the smallest delay."""
    d = np.asarray(delay_s, dtype=float)
    n = d.size if n_sent is None else int(n_sent)
    checks.probability("target", target, allow_one=True)
    recv = np.sort(d[np.isfinite(d)])
    if recv.size == 0:
        return float("nan")
    allowed = int(np.floor(target * n + 1e-9))  # packets allowed to be late
    if allowed >= recv.size:
        return float(recv[0])
    return float(recv[recv.size - 1 - allowed])


RFC3550_JITTER_GAIN = 1.0 / 16.0
"""The gain of the jitter estimator, RFC 3550 §6.4.1 ("the gain parameter 1/16")."""


def interarrival_jitter(send_time_s, recv_time_s) -> np.ndarray:
    """RFC 3550 interarrival jitter after each packet, in arrival order (seconds).

    §6.4.1: ``D(i-1, i) = (R_i - R_{i-1}) - (S_i - S_{i-1})`` for each packet and the previous
    one *in order of arrival*, and ``J_i = J_{i-1} + (|D(i-1, i)| - J_{i-1}) / 16`` (the
    estimator of Appendix A.8, with times in seconds instead of RTP timestamp units), starting
    from J = 0. Packets not received (NaN) are skipped. The last element is the value an RTCP
    receiver report would carry at the end of the flow.
    """
    s = np.asarray(send_time_s, dtype=float)
    r = np.asarray(recv_time_s, dtype=float)
    ok = np.isfinite(r) & np.isfinite(s)
    s, r = s[ok], r[ok]
    order = np.argsort(r, kind="stable")
    transit = r[order] - s[order]
    if transit.size < 2:
        return np.zeros(transit.size)
    return np.concatenate(([0.0], _smooth_from_zero(np.abs(np.diff(transit)), RFC3550_JITTER_GAIN)))


def _smooth_from_zero(x: np.ndarray, gain: float) -> np.ndarray:
    """``y_k = y_{k-1} + gain * (x_k - y_{k-1})`` for each ``k``, from ``y_{-1} = 0``: the
    recursion of RFC 3550 §6.4.1 / Appendix A.8 (``gain`` 1/16) without a Python loop.

    Unrolled, ``y_k = sum over j >= 0 of gain * (1 - gain)**j * x_{k-j}``. That sum is built by
    recursive doubling: after adding ``(1 - gain)**s * y_{k-s}`` for ``s`` = 1, 2, 4, ... each
    ``y_k`` holds the terms ``j < 2 s``; it stops when ``2 s`` covers the whole series or
    ``(1 - gain)**s`` is 0 in floating point (``s`` = 16384 for 1/16), so the result equals the
    loop's to rounding, in about log2(len(x)) passes over the array. (``scipy.signal.lfilter``
    would do it too, but importing ``scipy.signal`` takes half a second, more than a whole small
    ``tcpdelay metrics`` run; see also :func:`tcpdelay.model.delay.repair._fft_convolve`.)
    """
    y = gain * np.asarray(x, dtype=float)
    decay = 1.0 - gain  # (1 - gain)**s
    s = 1
    while s < y.size and decay > 0.0:
        y[s:] += decay * y[:-s]  # the right side is computed before the sum: no aliasing
        s *= 2
        decay *= decay
    return y


def loss_summary(lost, dropped) -> dict:
    """Counts and rates over the packets the source produced: ``lost`` (on the wire, never
    received), ``dropped`` (skipped by the sender) and both together (``missing``)."""
    lost = np.asarray(lost, bool)
    dropped = np.asarray(dropped, bool)
    n = lost.size
    n_wire = int(n - np.count_nonzero(dropped))
    n_lost, n_drop = int(np.count_nonzero(lost)), int(np.count_nonzero(dropped))
    return {
        "packets": int(n),
        "packets_on_wire": n_wire,
        "lost": n_lost,
        "dropped_by_sender": n_drop,
        "loss_rate": n_lost / n_wire if n_wire else None,
        "missing_rate": (n_lost + n_drop) / n if n else None,
    }
