"""Latency of the TCP three-way handshake (connection establishment).

Cardwell, Savage, Anderson, "Modeling TCP Latency", INFOCOM 2000, Section II-C, eqs (1)–(4).

The active opener (client) sends its SYN ``i >= 0`` times unsuccessfully before the ``(i+1)``-th
reaches the passive opener (server); the server then sends its SYN/ACK ``j >= 0`` times
unsuccessfully before the ``(j+1)``-th reaches the client. Each party waits ``T_s`` for the
first answer and doubles the wait after each retransmission. With ``p_r`` the loss rate from
client to server (the SYN direction, "reverse" of the usual data flow) and ``p_f`` the loss rate
from server to client ("forward"):

* eq (1): ``P_h(i, j) = p_r^i (1 - p_r) p_f^j (1 - p_f)``
* eq (2): ``L_h(i, j) = RTT + (2^i + 2^j - 2) T_s``
* eq (3): ``P[L_h <= t] = sum over L_h(i, j) <= t of P_h(i, j)``
* eq (4): ``E[L_h] ~= RTT + T_s ((1-p_r)/(1-2p_r) + (1-p_f)/(1-2p_f) - 2)`` for ``p < 1/2``.

Retry limits
------------
Real stacks give up: Linux retransmits a SYN ``tcp_syn_retries`` times (default 6) and a SYN/ACK
``tcp_synack_retries`` times (default 5). So ``i`` ranges over ``0..syn_retries`` and ``j`` over
``0..synack_retries``; a handshake needing more attempts *fails* (the client's ``connect()``
returns ETIMEDOUT). The functions here therefore return the probability of success separately,
and the distribution and mean of the latency *conditioned on success* (the latency of the
connections that are established). The eq (4) approximation sums the unbounded geometric
series instead; it diverges as ``p -> 1/2`` and is undefined (NaN here) for ``p >= 1/2``.

Defaults: ``T_s = 1 s`` (RFC 6298 §2.1 and Linux ``TCP_TIMEOUT_INIT``; the paper used the 3 s of
RFC 1122), 6 SYN retries and 5 SYN/ACK retries (Linux defaults). The model follows RFC 793: the
server ignores retransmitted SYNs while its own SYN/ACK timer runs (Linux in fact answers a
retransmitted SYN with a SYN/ACK, which is slightly faster; not modelled).

All functions take scalars or arrays that broadcast together; the retry limits are integers.
"""

from __future__ import annotations

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError

DEFAULT_SYN_TIMEOUT_S = 1.0
"""Initial SYN retransmission timeout T_s (RFC 6298 §2.1; Linux ``TCP_TIMEOUT_INIT``)."""

DEFAULT_SYN_RETRIES = 6
"""SYN retransmissions before the client gives up (Linux ``net.ipv4.tcp_syn_retries``)."""

DEFAULT_SYNACK_RETRIES = 5
"""SYN/ACK retransmissions before the server gives up (Linux ``net.ipv4.tcp_synack_retries``)."""

MAX_RETRIES = 30
"""Upper bound accepted for a retry limit (2**30 T_s is already decades)."""


def _retries(name: str, value) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name}: {value!r} is not an integer") from None
    if n != value or not 0 <= n <= MAX_RETRIES:
        raise ParameterError(f"{name}: {value!r} must be an integer in [0, {MAX_RETRIES}]")
    return n


def _checked(rtt_s, loss_forward, loss_reverse, syn_timeout_s):
    rtt = checks.positive("rtt_s", rtt_s)
    pf = checks.probability("loss_forward", loss_forward)
    pr = checks.probability("loss_reverse", loss_reverse)
    ts = checks.positive("syn_timeout_s", syn_timeout_s)
    return rtt, pf, pr, ts


def _truncated_backoff_moment(p: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For ``i`` geometric with failure probability ``p``, truncated to ``0..n``: return
    ``P[i <= n] = 1 - p^(n+1)`` and ``E[2^i ; i <= n] = sum_{i=0}^{n} (2p)^i (1-p)``
    (not yet divided by the success probability). A finite sum: exact for every ``p``,
    including ``p = 1/2`` where the closed form is 0/0."""
    term = 1.0 - p
    acc = np.zeros_like(p)
    for _ in range(n + 1):
        acc = acc + term
        term = term * 2.0 * p
    return 1.0 - p ** (n + 1), acc


def handshake_success_probability(
    loss_forward, loss_reverse, syn_retries=DEFAULT_SYN_RETRIES, synack_retries=DEFAULT_SYNACK_RETRIES
):
    """Probability that the handshake completes within the retry limits.

    ``(1 - p_r^(syn_retries+1)) (1 - p_f^(synack_retries+1))``: the sum of eq (1) over
    ``0 <= i <= syn_retries``, ``0 <= j <= synack_retries``.
    """
    pf = checks.probability("loss_forward", loss_forward)
    pr = checks.probability("loss_reverse", loss_reverse)
    ns = _retries("syn_retries", syn_retries)
    na = _retries("synack_retries", synack_retries)
    return ((1.0 - pr ** (ns + 1)) * (1.0 - pf ** (na + 1)))[()]


def handshake_failure_time_s(syn_timeout_s=DEFAULT_SYN_TIMEOUT_S, syn_retries=DEFAULT_SYN_RETRIES):
    """Time after the first SYN at which the client gives up: ``(2^(n+1) - 1) T_s``
    (127 s with the defaults: waits of 1, 2, 4, ..., 64 s)."""
    ts = checks.positive("syn_timeout_s", syn_timeout_s)
    n = _retries("syn_retries", syn_retries)
    return ((2.0 ** (n + 1) - 1.0) * ts)[()]


def handshake_mean_s(
    rtt_s,
    loss_forward,
    loss_reverse,
    syn_timeout_s=DEFAULT_SYN_TIMEOUT_S,
    syn_retries=DEFAULT_SYN_RETRIES,
    synack_retries=DEFAULT_SYNACK_RETRIES,
):
    """Exact mean handshake latency of the connections that succeed, from eqs (1)–(2).

    Parameters
    ----------
    rtt_s : array_like
        Round-trip time, seconds (> 0).
    loss_forward : array_like
        ``p_f``, loss rate server -> client (the SYN/ACK direction), in [0, 1).
    loss_reverse : array_like
        ``p_r``, loss rate client -> server (the SYN direction), in [0, 1).
    syn_timeout_s : array_like, optional
        Initial SYN timeout ``T_s`` (default 1 s), doubled after each retransmission.
    syn_retries, synack_retries : int, optional
        Retransmissions before giving up (defaults 6 and 5, as Linux).

    Returns
    -------
    ndarray or float
        ``E[L_h | success] = RTT + T_s (E[2^i | i <= n_s] + E[2^j | j <= n_a] - 2)`` where
        ``i`` and ``j`` are independent truncated geometric counts (eq 1). The probability
        that the handshake fails is :func:`handshake_success_probability`'s complement; a
        failed handshake is not included in this mean.

    Notes
    -----
    Cardwell et al. eq (2) gives ``L_h(i, j)``; averaging it over eq (1) restricted to the
    retry limits gives this expression. It stays finite for every ``p < 1`` (unlike eq 4).
    """
    rtt, pf, pr, ts = _checked(rtt_s, loss_forward, loss_reverse, syn_timeout_s)
    ns = _retries("syn_retries", syn_retries)
    na = _retries("synack_retries", synack_retries)
    ok_r, m_r = _truncated_backoff_moment(pr, ns)
    ok_f, m_f = _truncated_backoff_moment(pf, na)
    return (rtt + ts * (m_r / ok_r + m_f / ok_f - 2.0))[()]


def handshake_mean_approx_s(rtt_s, loss_forward, loss_reverse, syn_timeout_s=DEFAULT_SYN_TIMEOUT_S):
    """Cardwell et al. eq (4), the approximate mean handshake latency with unlimited retries::

        E[L_h] = RTT + T_s ((1 - p_r)/(1 - 2 p_r) + (1 - p_f)/(1 - 2 p_f) - 2)

    The series behind it, ``sum (2p)^i (1-p)``, converges only for ``p < 1/2``; where
    ``p_f >= 1/2`` or ``p_r >= 1/2`` the result is NaN (undefined), not a number that looks
    meaningful. For small loss it agrees with :func:`handshake_mean_s`; as ``p -> 1/2`` it grows
    without bound while the exact, retry-limited mean stays finite (the paper's Fig 4).
    """
    rtt, pf, pr, ts = _checked(rtt_s, loss_forward, loss_reverse, syn_timeout_s)
    defined = (pf < 0.5) & (pr < 0.5)
    sf = np.where(pf < 0.5, pf, 0.0)
    sr = np.where(pr < 0.5, pr, 0.0)
    approx = rtt + ts * ((1 - sr) / (1 - 2 * sr) + (1 - sf) / (1 - 2 * sf) - 2.0)
    return np.where(defined, approx, np.nan)[()]


def handshake_distribution(
    rtt_s,
    loss_forward,
    loss_reverse,
    syn_timeout_s=DEFAULT_SYN_TIMEOUT_S,
    syn_retries=DEFAULT_SYN_RETRIES,
    synack_retries=DEFAULT_SYNACK_RETRIES,
    *,
    conditional: bool = True,
):
    """The discrete distribution of handshake latency, eqs (1)–(2), for scalar parameters.

    Returns
    -------
    latency_s, probability : ndarray
        Distinct latencies in increasing order and their probabilities. With
        ``conditional=True`` (default) the probabilities are conditioned on success and sum
        to 1; otherwise they are eq (1) as is and sum to the success probability.
    """
    rtt, pf, pr, ts = _checked(rtt_s, loss_forward, loss_reverse, syn_timeout_s)
    if any(np.ndim(x) for x in (rtt, pf, pr, ts)):
        raise ParameterError("handshake_distribution: rtt_s, losses and syn_timeout_s must be scalars")
    ns = _retries("syn_retries", syn_retries)
    na = _retries("synack_retries", synack_retries)
    i = np.arange(ns + 1)[:, None]
    j = np.arange(na + 1)[None, :]
    prob = (pr**i * (1 - pr)) * (pf**j * (1 - pf))  # eq (1)
    lat = rtt + (2.0**i + 2.0**j - 2.0) * ts  # eq (2)
    lat, prob = lat.ravel(), prob.ravel()
    uniq, inverse = np.unique(lat, return_inverse=True)
    merged = np.bincount(inverse, weights=prob, minlength=uniq.size)
    if conditional:
        merged = merged / merged.sum()
    return uniq, merged


def handshake_cdf(
    t_s,
    rtt_s,
    loss_forward,
    loss_reverse,
    syn_timeout_s=DEFAULT_SYN_TIMEOUT_S,
    syn_retries=DEFAULT_SYN_RETRIES,
    synack_retries=DEFAULT_SYNACK_RETRIES,
    *,
    conditional: bool = True,
):
    """``P[L_h <= t]``, eq (3), at the times ``t_s`` (array), for scalar path parameters.

    With ``conditional=False`` the CDF tends to the success probability rather than 1 (the
    missing mass is the handshakes that fail).
    """
    t = checks.as_array("t_s", t_s)
    lat, prob = handshake_distribution(
        rtt_s, loss_forward, loss_reverse, syn_timeout_s, syn_retries, synack_retries, conditional=conditional
    )
    cum = np.concatenate([[0.0], np.cumsum(prob)])
    return cum[np.searchsorted(lat, t, side="right")][()]
