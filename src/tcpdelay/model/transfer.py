"""Expected latency of a TCP data transfer: slow start, first loss, remainder, delayed ACK.

Cardwell, Savage, Anderson, "Modeling TCP Latency", INFOCOM 2000, Section II-D, eqs (5)–(25);
the steady-state part is the PFTK model (Padhye, Firoiu, Towsley, Kurose, "Modeling TCP
Throughput: A Simple Model and its Empirical Validation", SIGCOMM 1998), reused from
:mod:`tcpdelay.model.throughput`.

A transfer of ``d`` segments (``d = ceil(size_bytes / mss_bytes)``) takes, in expectation,
eq (25)::

    E[T] = E[T_ss] + E[T_loss] + E[T_ca] + E[T_delay]

* ``E[T_ss]`` — the initial slow start, eqs (5)–(15): the sender sends ``E[d_ss]`` segments
  before the first loss, its window grows by ``gamma = 1 + 1/b`` per round from ``w1``, and is
  capped at ``W_max``.
* ``E[T_loss]`` — the first loss, eqs (16)–(20): with probability ``l_ss = 1 - (1-p)^d`` slow
  start ends in a loss, recovered by a timeout (probability ``Q(p, W)``, cost
  ``G(p) T0 / (1-p)``) or by fast recovery (one RTT).
* ``E[T_ca]`` — the remainder, eqs (21)–(24): ``d - E[d_ss]`` segments at the PFTK rate
  ``R(p, RTT, T0, W_max)``.
* ``E[T_delay]`` — the first delayed ACK (Section II-D.4): 0, 100 ms (BSD: uniform on
  0–200 ms), 150 ms (Windows: uniform on 100–200 ms) or a given constant.

Parameters common to the functions (scalars or arrays, broadcast together):

``d`` segments (>= 1; real values are accepted), ``p`` per-segment loss rate in [0, 1),
``rtt_s`` > 0, ``t0_s`` > 0 the mean first retransmission timeout (default
:func:`tcpdelay.model.throughput.default_t0_s`, RTT + 200 ms), ``w1`` initial window in
segments (>= 1; default 10 as RFC 6928 and Linux), ``b`` segments per ACK (>= 1; default 1:
Linux grows cwnd per segment acknowledged, not per ACK, so its growth factor is 2 even with
delayed ACKs; the paper's ``b = 2`` gives ``gamma = 1.5``), ``w_max`` the window limit in
segments (>= 1, ``inf`` for none). An initial window above ``w_max`` is clamped to ``w_max``.

Readings of the paper that differ from its printed text (see docs/models/latency.md):

* eq (5): the printed closed form ``(1-(1-p)^d)(1-p)/p + 1`` does not equal the printed sum
  ``sum_{k<d} (1-p)^k p k + (1-p)^d d``, which is ``(1-(1-p)^d)(1-p)/p`` exactly (and tends
  to ``d`` as ``p -> 0``, as the text requires). We use the sum.
* eq (20): the timeout probability is evaluated at the window slow start actually reaches,
  ``min(E[W_ss], W_max)`` (at least 1), rather than at the uncapped ``E[W_ss]``.
* eq (15): the continuous round count is floored at ``(1 - p)`` rounds, because a transfer
  that fits in the first window still takes one RTT (``min_rounds=0`` restores the paper).
"""

from __future__ import annotations

import math

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError
from tcpdelay.model import throughput as tp

DEFAULT_INIT_WINDOW = 10
"""Initial congestion window w1 in segments (RFC 6928; Linux ``TCP_INIT_CWND``)."""

DEFAULT_ACKS_PER_SEGMENT = 1
"""b: 1 models Linux, whose cwnd grows per segment acknowledged (RFC 3465 byte counting)."""

DELAYED_ACK_PRESETS = {
    "none": (0.0, 0.0),
    "bsd": (0.0, 0.2),
    "windows": (0.1, 0.2),
}
"""Cost of the first delayed ACK as a uniform range (low, high) in seconds (Section II-D.4):
BSD's 200 ms heartbeat makes it uniform on 0–200 ms (mean 100 ms), Windows 95/NT 4.0 uniform on
100–200 ms (mean 150 ms)."""


# ----------------------------------------------------------------------------- helpers

def segments_for(size_bytes, mss_bytes):
    """Number of full-or-partial segments ``ceil(size_bytes / mss_bytes)`` (>= 1)."""
    size = checks.positive("size_bytes", size_bytes)
    mss = checks.positive("mss_bytes", mss_bytes)
    return np.ceil(size / mss)[()]


def growth_factor(b):
    """gamma = 1 + 1/b, the per-round growth of cwnd in slow start (eq 6)."""
    b = checks.at_least("acks_per_segment", b, 1.0)
    return (1.0 + 1.0 / b)[()]


def delayed_ack_bounds_s(spec) -> tuple[float, float]:
    """The first delayed ACK's cost as a uniform range ``(low, high)`` in seconds.

    ``spec`` is ``"none"``, ``"bsd"`` (0–200 ms), ``"windows"`` (100–200 ms), or a number of
    seconds >= 0 taken as a constant cost (``(x, x)``). The expected cost ``E[T_delay]`` is the
    midpoint.
    """
    if isinstance(spec, str):
        key = spec.strip().lower()
        if key in DELAYED_ACK_PRESETS:
            return DELAYED_ACK_PRESETS[key]
        try:
            value = float(key)
        except ValueError:
            raise ParameterError(
                f"delayed_ack: {spec!r} is not one of none, bsd, windows or a number of seconds >= 0"
            ) from None
    else:
        try:
            value = float(spec)
        except (TypeError, ValueError):
            raise ParameterError(
                f"delayed_ack: {spec!r} is not one of none, bsd, windows or a number of seconds >= 0"
            ) from None
    if not (math.isfinite(value) and value >= 0):
        raise ParameterError(f"delayed_ack: {spec!r} must be none, bsd, windows or a finite number of seconds >= 0")
    return (value, value)


def delayed_ack_mean_s(spec) -> float:
    """``E[T_delay]``: 0 for none, 0.1 s for BSD, 0.15 s for Windows, or the given seconds."""
    lo, hi = delayed_ack_bounds_s(spec)
    return 0.5 * (lo + hi)


def _min_rounds(value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"min_rounds: {value!r} is not a number") from None
    if not 0.0 <= v <= 1.0:
        raise ParameterError(f"min_rounds: {value!r} must lie in [0, 1]")
    return v


def _common(d, p, rtt_s, w1, b, w_max):
    d = checks.at_least("segments", d, 1.0)
    p = checks.probability("loss", p)
    rtt = checks.positive("rtt_s", rtt_s)
    w1 = checks.at_least("init_window", w1, 1.0)
    b = checks.at_least("acks_per_segment", b, 1.0)
    wm = checks.at_least("max_window", w_max, 1.0, allow_inf=True)
    return d, p, rtt, np.minimum(w1, wm), b, wm


# ----------------------------------------------------------------------------- slow start

def _expected_slow_start_data(d, p):
    # sum_{k=0}^{d-1} (1-p)^k p k + (1-p)^d d = (1-p)(1-(1-p)^d)/p; -> d as p -> 0.
    # For p d < 1e-6 the series d - p d (d+1)/2 (error ~ (p d)^2 d / 6) avoids the loss of
    # precision of expm1/log1p at tiny and subnormal p.
    lossy = p * d >= 1e-6
    ps = np.where(lossy, p, 0.5)
    with np.errstate(over="ignore", invalid="ignore"):
        val = (1.0 - ps) * -np.expm1(d * np.log1p(-ps)) / ps
    return np.where(lossy, np.minimum(val, d), d - p * d * (d + 1.0) / 2.0)


def expected_slow_start_data(d, p):
    """``E[d_ss]``, segments sent in the initial slow start before the first loss, eq (5).

    ``E[d_ss] = sum_{k=0}^{d-1} (1-p)^k p k + (1-p)^d d = (1-p)(1-(1-p)^d)/p``, and ``d`` at
    ``p = 0``. (The paper's printed closed form adds 1, which disagrees with its own sum; see the
    module notes.)
    """
    d = checks.at_least("segments", d, 1.0)
    p = checks.probability("loss", p)
    return _expected_slow_start_data(d, p)[()]


def slow_start_window(d, w1=DEFAULT_INIT_WINDOW, b=DEFAULT_ACKS_PER_SEGMENT):
    """``W_ss(d) = d (gamma-1)/gamma + w1/gamma``, the window after sending ``d`` segments in
    unconstrained slow start, eq (10) (and eq 11 with ``d = E[d_ss]``).

    With ``gamma = 1.5`` and ``1 <= w1 <= 3`` this is about ``d/3``.
    """
    d = checks.non_negative("segments", d)
    w1 = checks.at_least("init_window", w1, 1.0)
    g = growth_factor(b)
    return (d * (g - 1.0) / g + w1 / g)[()]


def slow_start_data_to_reach(window, w1=DEFAULT_INIT_WINDOW, b=DEFAULT_ACKS_PER_SEGMENT):
    """Segments sent in slow start until cwnd reaches ``window``: ``(gamma W - w1)/(gamma - 1)``,
    eq (12) (the ``d_1`` of the capped case). About ``3 W`` for ``gamma = 1.5``."""
    w = checks.at_least("window", window, 1.0)
    w1 = checks.at_least("init_window", w1, 1.0)
    g = growth_factor(b)
    return ((g * w - w1) / (g - 1.0))[()]


def _slow_start_rounds(dss, w1, g, wm, p=0.0, min_rounds=1.0):
    """eq (15) in rounds for ``dss`` segments; eqs (9), (12)–(14); at least ``min_rounds (1-p)``."""
    ln_g = np.log(g)
    w_ss = dss * (g - 1.0) / g + w1 / g  # eq (11)
    capped = w_ss > wm
    free = np.log1p(dss * (g - 1.0) / w1) / ln_g  # eq (9)
    wm_f = np.where(np.isfinite(wm), wm, 1.0)
    d1 = (g * wm_f - w1) / (g - 1.0)  # eq (12)
    r1 = np.log(wm_f / w1) / ln_g + 1.0  # eq (13)
    r2 = (dss - d1) / wm_f  # eq (14)
    rounds = np.where(capped, r1 + r2, free)
    return np.maximum(rounds, min_rounds * (1.0 - p)), w_ss


def slow_start_time_s(
    d, p, rtt_s, w1=DEFAULT_INIT_WINDOW, b=DEFAULT_ACKS_PER_SEGMENT, w_max=np.inf, *, min_rounds=1.0
):
    """``E[T_ss]``, the expected duration of the initial slow start, eq (15).

    Parameters
    ----------
    d : array_like
        Transfer size in segments (>= 1).
    p : array_like
        Per-segment loss rate in [0, 1).
    rtt_s : array_like
        Round-trip time in seconds.
    w1, b, w_max : array_like, optional
        Initial window (segments), segments per ACK (``gamma = 1 + 1/b``), window cap
        (segments, ``inf`` for none).
    min_rounds : float, optional
        Floor on the round count, applied as ``min_rounds (1 - p)`` (default 1; 0 gives the
        paper's eq 15 exactly). See Notes.

    Returns
    -------
    ndarray or float
        ``RTT log_gamma(E[d_ss](gamma-1)/w1 + 1)`` when ``E[W_ss] <= W_max``, else
        ``RTT [log_gamma(W_max/w1) + 1 + (E[d_ss] - (gamma W_max - w1)/(gamma-1)) / W_max]``.
        The two branches meet where ``E[W_ss] = W_max``.

    Notes
    -----
    The paper's round count is continuous: for ``E[d_ss] < w1`` it is below one round
    (``log_2(1/10 + 1) = 0.14`` RTT for one segment with ``w1 = 10``), yet the transfer ends only
    when the ACK of its last segment is back, a full RTT after it was sent. So the count is
    floored at one round, weighted by ``1 - p``, the probability that the first segment gets
    through (if it is lost, slow start sends nothing and eq 20 charges the timeout). The floor
    only binds when everything expected in slow start fits in the first window; it keeps
    latency non-decreasing in ``p``.
    """
    d, p, rtt, w1, b, wm = _common(d, p, rtt_s, w1, b, w_max)
    floor = _min_rounds(min_rounds)
    rounds, _ = _slow_start_rounds(_expected_slow_start_data(d, p), w1, 1.0 + 1.0 / b, wm, p, floor)
    return (rtt * rounds)[()]


# ----------------------------------------------------------------------------- first loss

def expected_timeout_cost_s(p, t0_s):
    """``E[Z^TO] = G(p) T0 / (1 - p)``, the expected cost of a timeout sequence, eq (18)."""
    p = checks.probability("loss", p)
    t0 = checks.positive("t0_s", t0_s)
    return (tp.timeout_backoff_factor(p) * t0 / (1.0 - p))[()]


def first_loss_time_s(
    d, p, rtt_s, t0_s=None, w1=DEFAULT_INIT_WINDOW, b=DEFAULT_ACKS_PER_SEGMENT, w_max=np.inf
):
    """``E[T_loss]``, the expected cost of recovering from the loss that ends slow start, eq (20)::

        T_loss = l_ss (Q(p, W) E[Z^TO] + (1 - Q(p, W)) RTT),   l_ss = 1 - (1-p)^d  (eq 16)

    with ``Q`` of eq (17) (:func:`tcpdelay.model.throughput.timeout_probability`) evaluated at
    ``W = max(1, min(E[W_ss], W_max))`` and ``E[Z^TO]`` of eq (18). Zero when ``p = 0``.
    """
    d, p, rtt, w1, b, wm = _common(d, p, rtt_s, w1, b, w_max)
    t0 = tp.default_t0_s(rtt) if t0_s is None else checks.positive("t0_s", t0_s)
    return _first_loss(d, p, rtt, t0, w1, 1.0 + 1.0 / b, wm, _expected_slow_start_data(d, p))[()]


def _first_loss(d, p, rtt, t0, w1, g, wm, dss):
    l_ss = -np.expm1(d * np.log1p(-p))  # eq (16)
    w_ss = dss * (g - 1.0) / g + w1 / g  # eq (11)
    w_loss = np.maximum(1.0, np.minimum(w_ss, wm))
    q = tp.timeout_probability(p, w_loss)  # eq (17)
    z_to = tp.timeout_backoff_factor(p) * t0 / (1.0 - p)  # eqs (18), (19)
    return l_ss * (q * z_to + (1.0 - q) * rtt)  # eq (20)


# ----------------------------------------------------------------------------- remainder

def remainder_time_s(d, p, rtt_s, t0_s=None, b=DEFAULT_ACKS_PER_SEGMENT, w_max=np.inf):
    """``E[T_ca] = E[d_ca] / R(p, RTT, T0, W_max)``, eqs (21) and (24).

    ``E[d_ca] = d - E[d_ss]`` segments are left after slow start (eq 21) and are sent at the PFTK
    steady-state rate ``R`` of eq (22)–(23) (:func:`tcpdelay.model.throughput.pftk_segments_per_s`,
    with the same ``b``). Zero when ``p = 0`` (nothing is left).
    """
    d = checks.at_least("segments", d, 1.0)
    p = checks.probability("loss", p)
    rtt = checks.positive("rtt_s", rtt_s)
    b = checks.at_least("acks_per_segment", b, 1.0)
    wm = checks.at_least("max_window", w_max, 1.0, allow_inf=True)
    t0 = tp.default_t0_s(rtt) if t0_s is None else checks.positive("t0_s", t0_s)
    return _remainder(d, p, rtt, t0, b, wm, _expected_slow_start_data(d, p))[()]


def _remainder(d, p, rtt, t0, b, wm, dss):
    d_ca = np.maximum(d - dss, 0.0)  # eq (21)
    rate = tp.pftk_segments_per_s(p, rtt, t0, b, wm)  # eq (22)
    with np.errstate(invalid="ignore"):
        t = d_ca / rate  # eq (24)
    return np.where(d_ca > 0, t, 0.0)


# ----------------------------------------------------------------------------- total

def transfer_components(
    d,
    p,
    rtt_s,
    t0_s=None,
    w1=DEFAULT_INIT_WINDOW,
    b=DEFAULT_ACKS_PER_SEGMENT,
    w_max=np.inf,
    delayed_ack="none",
    *,
    min_rounds=1.0,
):
    """All terms of eq (25) at once (arrays broadcast together).

    Returns
    -------
    dict of ndarray
        ``slow_start_segments`` (``E[d_ss]``, eq 5), ``slow_start_window`` (``E[W_ss]``,
        eq 11, uncapped), ``slow_start_s`` (eq 15), ``first_loss_s`` (eq 20), ``remainder_s``
        (eq 24), ``delayed_ack_s`` (``E[T_delay]``), ``transfer_mean_s`` (eq 25, their sum).
        ``min_rounds`` floors the slow-start round count (see :func:`slow_start_time_s`).
    """
    d, p, rtt, w1, b, wm = _common(d, p, rtt_s, w1, b, w_max)
    t0 = tp.default_t0_s(rtt) if t0_s is None else checks.positive("t0_s", t0_s)
    t_delay = delayed_ack_mean_s(delayed_ack)
    g = 1.0 + 1.0 / b
    dss = _expected_slow_start_data(d, p)
    rounds, w_ss = _slow_start_rounds(dss, w1, g, wm, p, _min_rounds(min_rounds))
    t_ss = rtt * rounds
    t_loss = _first_loss(d, p, rtt, t0, w1, g, wm, dss)
    t_ca = _remainder(d, p, rtt, t0, b, wm, dss)
    total = t_ss + t_loss + t_ca + t_delay
    shape = np.shape(total)
    out = {
        "slow_start_segments": dss,
        "slow_start_window": w_ss,
        "slow_start_s": t_ss,
        "first_loss_s": t_loss,
        "remainder_s": t_ca,
        "delayed_ack_s": np.full(shape, t_delay),
        "transfer_mean_s": total,
    }
    return {k: np.broadcast_to(v, shape)[()] for k, v in out.items()}


def transfer_time_s(
    d,
    p,
    rtt_s,
    t0_s=None,
    w1=DEFAULT_INIT_WINDOW,
    b=DEFAULT_ACKS_PER_SEGMENT,
    w_max=np.inf,
    delayed_ack="none",
    *,
    min_rounds=1.0,
):
    """``E[T]``, the expected data-transfer latency in seconds, eq (25).

    See :func:`transfer_components` for the terms. With ``p = 0`` this is eq (15) (plus the
    delayed-ACK cost); for large ``d`` it approaches ``d / R`` with ``R`` of eq (22).
    """
    return transfer_components(d, p, rtt_s, t0_s, w1, b, w_max, delayed_ack, min_rounds=min_rounds)[
        "transfer_mean_s"
    ]
