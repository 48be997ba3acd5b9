"""The TCP stacks whose loss recovery the delay model can follow (typed rules, no I/O).

``paper`` is Brosh et al.'s chain as published (Table 6, our reading in docs/models/delay.md):
three duplicate ACKs, timeouts from small windows, the window halved to ``⌊(r+3)/2⌋``. The two
others describe how a stack recovers *today*, each rule from its source:

``linux`` — Linux's defaults since 4.x, as this kernel (6.18) runs them:

- **loss detection by RACK** (RFC 8985 §6.2, ``tcp_rack_detect_loss`` in
  ``net/ipv4/tcp_recovery.c``): a segment is lost once a segment sent after it is SACKed and
  ``xmit_time + rack.rtt + reo_wnd`` has passed. ``reo_wnd`` is ``min_rtt/4``
  (``tcp_rack_reo_wnd``), 0 while the connection is already in recovery or once ``reordering``
  (3, ``sysctl tcp_reordering``) segments are SACKed above the hole; waiting it out takes the
  reordering timer, which ``tcp_rack_mark_lost`` arms two ticks late and fires on a tick
  (``CONFIG_HZ`` = 250 here: +8 to +12 ms);
- **a lost retransmission is found the same way** (RFC 8985 §6.2, RACK marks by transmission
  time): a segment sent after the retransmission is SACKed, no RTO;
- **no tail-loss probe while the source writes**: ``tcp_write_xmit`` re-arms the probe timer
  (``tcp_schedule_loss_probe``, PTO = 2·SRTT, +200 ms with one segment out) at every
  transmission, so a source whose interval is below the PTO never lets it fire;
- **RTO = SRTT + max(4·RTTVAR, 200 ms)** (``tcp_set_rto``, ``tcp_rto_min``): reached only when
  every segment sent for ~200 ms is lost, which the model neglects;
- **window after recovery**: CUBIC's ``ssthresh = max(⌊β·cwnd⌋, 2)``, β = 0.7 (RFC 9438 §4.6;
  ``bictcp_recalc_ssthresh``, 717/1024), reached by PRR (RFC 6937) and held through the
  recovery; one reduction per recovery episode;
- **growth**: only while the window limits the sender (``tcp_is_cwnd_limited``), which
  ``tcp_cwnd_validate`` judges right after each transmission: the flight reaches ``cwnd``. A
  CBR source's flight right after it writes is ``⌊r⌋ + 1`` segments, so an application-limited
  window still grows up to ``⌊r⌋ + 2`` (:func:`app_limited_window_cap`; the committed runs' final
  ``TCP_INFO`` gives cwnd 7 at r = 5 and 3 at r = 1) and no further, and it does not shrink
  (``tcp_cwnd_application_limited`` decays it only toward the flight, and not below the initial
  window). Growth is by CUBIC's window function
  ``W(t) = C(t−K)³ + W_max`` (RFC 9438 §4.2, C = 0.4 segments/s³, ``bictcp_update``) or its
  Reno-friendly estimate, ``α = 3(1−β)/(1+β)`` segments per round (§4.3, ``tcp_friendliness``),
  whichever is larger. ``W_max`` is the window the last reduction cut, which the chain does
  not carry: a window ``w`` below ``β·(⌊r⌋ + 2)`` is taken as just cut from ``w/β`` (a
  cascade of reductions, as at high loss, where Linux's ``ssthresh`` ends at 2–4), and as the
  cut came before the window regained the last ``W_max``, fast convergence (RFC 9438 §4.7)
  sets ``W_max = (w/β)·(1 + β)/2`` (:func:`cubic_w_max`); a window above it is taken
  as regrowing toward the window an application-limited source is cut from, ``⌊r⌋ + 2``
  (:func:`next_window`); one round from ``w`` then gives ``W_max + C(s + RTT)³`` with
  ``s = ∛((w − W_max)/C)`` (the cubic depends on the time since the reduction only through the
  window reached). At RTT 300 ms the cubic term regains most of a 30 % cut from ``⌈r⌉`` in
  three rounds; at 20 ms the Reno-friendly term rules. The kernel computes the target in
  integers (``bictcp_update``: ``W_max − ⌊C(K − t)³⌋``), so a window just cut gains a whole
  segment in its first round trip, not 0.53, and the chain follows it (:func:`next_window`).

``classic`` — SACK loss recovery before RACK, as ns-3 (3.44) and Linux before 4.4 did it:

- **three duplicate ACKs** (RFC 5681 §3.2, RFC 6675 ``DupThresh``): a hole is declared lost when
  three segments above it are SACKed; limited transmit (RFC 3042) keeps sending;
- **a lost retransmission waits for the RTO** (RFC 6675 §5 cannot detect it): the timer restarted
  by the last ACK that advanced (RFC 6298 §5.3) fires ``T0`` later, then backs off ``2·T0``,
  ``4·T0`` … (§5.5), ``T0 = SRTT + max(4·RTTVAR, 200 ms)`` (ns-3 is set to Linux's floor);
- **window**: Reno's ``ssthresh = max(cwnd/2, 2)`` (``tcp_reno_ssthresh``; ns-3's
  ``TcpLinuxReno::GetSsThresh``), +1 segment a round in congestion avoidance (RFC 5681 eq 3),
  slow start after a timeout up to the rate the source needs (the halved ``cwnd`` of an
  application-limited sender is above it: see the next point);
- **growth while application-limited** (a stand-in, not ns-3's rule): the chain's window keeps
  growing while the application limits the sender, one segment per window of ACKed segments,
  so a single loss halves a window above ``r = f·RTT`` and leaves little sender backlog. ns-3
  3.44's ``TcpLinuxReno`` does validate its window (``m_suppressIncreaseIfCwndLimited``, true by
  default, suppresses the increase while ``m_isCwndLimited`` is false: ``tcp-linux-reno.h``),
  and a traced ns-3 run (video, RTT 300 ms, 0.5 %) holds cwnd at 17–18 segments for 30 s
  without a loss at ``r = 15``. What ns-3 also does, and the chain does not carry: its PRR
  leaves recovery with the window PRR reached (``TcpPrrRecovery::ExitRecovery`` does not set
  ``cwnd = ssthresh``; traced: 1–3 segments above ``ssthresh`` at windows up to 19), and it counts
  the window in bytes, so small packets ride many to a segment's worth of window. Validating
  the chain's window alone (cap ``⌊r⌋ + 2``, congestion avoidance after a recovery) over-predicts
  ns-3's video at RTT 100–300 ms by 46–111 %; growth while application-limited stands closer
  (docs/experiments/model-fidelity.md). Linux before RACK validated its window as it does now;
  such a kernel is ``classic``'s detection with ``linux``'s window.

Consumers: :mod:`tcpdelay.model.delay.stack_chain` (window and backlog per round) and
:mod:`tcpdelay.model.delay.repair` (the lost packet's repair time and the head-of-line delay it
causes at the receiver).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tcpdelay.errors import ParameterError

#: The stacks, default first.
STACKS = ("linux", "classic", "paper")
DEFAULT_STACK = "linux"


@dataclass(frozen=True)
class StackRules:
    """How one stack detects and repairs a loss and sets its window (units in the names)."""

    name: str
    detection: str
    """``"rack"`` (time-based, RFC 8985) or ``"dupack"`` (three duplicate ACKs, RFC 6675)."""
    lost_retransmission: str
    """``"rack"`` (found again after a later segment is SACKed) or ``"rto"`` (waits for the timer)."""
    beta: float
    """Window after a loss, as a fraction of the window before it (``ssthresh``)."""
    ca_growth_segments: float
    """Window growth per loss-free round in congestion avoidance, in segments (Reno's, or
    CUBIC's Reno-friendly region)."""
    slow_start_after_timeout: bool
    """After an RTO the window doubles each round up to the window a fast retransmit leaves."""
    cubic_c: float = 0.0
    """CUBIC's C (segments/s³, RFC 9438 §4.2); 0 for a Reno-like stack."""
    timer_hz: float = math.inf
    """The kernel's timer tick rate (``CONFIG_HZ``): RACK's reordering timer fires on ticks,
    two ticks late (``TCP_TIMEOUT_MIN``); ``inf`` for a stack without it."""
    dupthresh: int = 3
    """Segments SACKed above a hole that declare it lost (``tcp_reordering``, RFC 6675)."""
    reo_wnd_fraction: float = 0.25
    """RACK's reordering window as a fraction of ``min_rtt`` (RFC 8985 §6.2; ``tcp_rack_reo_wnd``)."""
    min_window_segments: int = 2
    """The smallest window a reduction leaves (``max(..., 2)`` in both stacks)."""
    app_limited_growth: bool = False
    """The window grows while the application limits the sender (one segment per window of
    ACKed segments, RFC 5681 eq 3): ``classic``'s stand-in for ns-3's faster regrowth after a
    recovery (module docstring; ns-3 3.44 itself validates its window). Linux grows only a
    window that limits it (``tcp_is_cwnd_limited``; congestion window validation, RFC 7661's
    idea)."""
    recovery_write_wait: float = 0.0
    """The share of a recovery round's writes that wait one packet interval ``1/f`` at the
    sender (PRR, RFC 6937 §3; ``tcp_cwnd_reduction``): in recovery ``cwnd = in_flight +
    sndcnt`` is set only upon an ACK, one segment per segment delivered, and the fast
    retransmission takes the detecting ACK's share. A write that comes after that ACK waits for
    the next one, and from then on every write of the round finds one segment ahead of it and
    waits for the next ACK, ``1/f`` later, until the recovery ends. With writes and ACKs ``1/f``
    apart (``r`` whole, as on the grid) which comes first at the detecting ACK is a race, won
    half the time; with ``r`` fractional the wait is the fixed gap to the next ACK, ``1/(2f)``
    on average: either way ``1/(2f)`` a write, carried as ``1/f`` for half of them. At
    ``r ≤ 1`` the retransmission's own ACK is the next one, and the mean wait of the ``r`` writes
    of the round, ``RTT/2``, is the same product."""
    flight_reaches_window: bool = False
    """Linux's test of "the window limited the sender" (``tcp_write_xmit`` →
    ``tcp_cwnd_validate``): true when, right after a transmission, the segments in flight reach
    ``cwnd``. An application-limited sender's flight right after it sends is the segment just
    sent plus those sent in the last round trip whose ACKs have not come back: ``⌊r⌋ + 1``
    (:func:`app_limited_window_cap`). So its window keeps growing, at the congestion-avoidance
    rate, until it is one above that flight, ``⌊r⌋ + 2``, where an ACK always frees a slot
    before the next write; a loss cuts that window, not ``⌈r⌉``."""


def _cubic_alpha(beta: float) -> float:
    """RFC 9438 §4.3: the Reno-friendly region grows ``3(1−β)/(1+β)`` segments per RTT."""
    return 3.0 * (1.0 - beta) / (1.0 + beta)


#: The kernel's ``CONFIG_HZ``: 250 on this machine's 6.18 and Debian's and Ubuntu's kernels
#: (Fedora's and RHEL's: 1000).
LINUX_HZ = 250.0

#: CUBIC's multiplicative decrease (RFC 9438 §4.6; Linux ``beta = 717`` of 1024).
CUBIC_BETA = 717 / 1024

RULES: dict[str, StackRules] = {
    "linux": StackRules("linux", detection="rack", lost_retransmission="rack", beta=CUBIC_BETA,
                        ca_growth_segments=_cubic_alpha(CUBIC_BETA), slow_start_after_timeout=True,
                        cubic_c=0.4, timer_hz=LINUX_HZ, flight_reaches_window=True,
                        recovery_write_wait=0.5),
    "classic": StackRules("classic", detection="dupack", lost_retransmission="rto", beta=0.5,
                          ca_growth_segments=1.0, slow_start_after_timeout=True, app_limited_growth=True),
}


def check_stack(stack) -> str:
    """``stack`` if it is one of :data:`STACKS`, else a ParameterError naming them."""
    if not isinstance(stack, str) or stack not in STACKS:
        raise ParameterError(f"stack: {stack!r} is not one of {', '.join(STACKS)}")
    return stack


def rules(stack: str) -> StackRules:
    """The rules of ``linux`` or ``classic`` (``paper`` has Table 6 instead)."""
    check_stack(stack)
    if stack == "paper":
        raise ParameterError("stack: 'paper' follows Table 6, not per-stack rules")
    return RULES[stack]


def _window_cut_from(rules_: StackRules, r: float) -> float:
    """The window a loss cuts an application-limited sender from: its cap
    (:func:`app_limited_window_cap`) where the window grows while application-limited, else
    ``⌈r⌉``."""
    return float(app_limited_window_cap(rules_, r) or max(1.0, math.ceil(r - 1e-9)))


def app_limited_window_cap(rules_: StackRules, r: float) -> int:
    """The window an application-limited sender's window grows to, in segments: ``⌊r⌋ + 2``
    with :attr:`StackRules.flight_reaches_window` (the flight right after a send, ``⌊r⌋ + 1``
    — the ACK of the segment sent ``r/f`` earlier comes back just after the send, a hair past
    the round trip — plus one), else 0 (the window does not grow; ``app_limited_growth``
    aside)."""
    if not rules_.flight_reaches_window:
        return 0
    return int(math.floor(r + 1e-9)) + 2


def window_after_loss(rules_: StackRules, w: int) -> int:
    """``max(⌊β·w⌋, 2)`` segments (integer arithmetic, as ``bictcp_recalc_ssthresh``) for a
    window-limited sender (its flight is its window)."""
    return max(rules_.min_window_segments, int(math.floor(rules_.beta * w + 1e-9)))


def cubic_w_max(rules_: StackRules, w, cap: float):
    """CUBIC's ``W_max`` (segments) for a window ``w`` in congestion avoidance, as the chain
    reads it from ``w`` alone (vectorized): the window the last reduction cut.

    - ``w`` below ``β·cap`` was just cut, from ``w/β``, a window below ``cap``: the loss came
      while the window was still regrowing toward the last ``W_max`` (a cascade of reductions),
      so **fast convergence** applies (RFC 9438 §4.7; ``bictcp_recalc_ssthresh`` in
      net/ipv4/tcp_cubic.c: ``cwnd < last_max_cwnd`` sets ``last_max_cwnd = cwnd·(1 + β)/2``,
      ``fast_convergence = 1`` by default) and ``W_max = (w/β)·(1 + β)/2``;
    - any other window regrows toward the window an application-limited source is cut from,
      ``cap`` (:func:`_window_cut_from`), cut at ``W_max = cap`` (no fast convergence: the
      window at the loss was not below the last ``W_max``).

    Without fast convergence the chain put a cascade's ``W_max`` at ``w/β``, 16 % above the
    kernel's, so it regrew too fast and under-predicted video at RTT 300 ms, 0.5 % by 33 %
    (9 % with it; docs/experiments/model-fidelity.md)."""
    w = np.asarray(w, dtype=float)
    cut_from = w / rules_.beta
    just_cut = cut_from < cap - 1e-9
    return np.where(just_cut, cut_from * (1.0 + rules_.beta) / 2.0, np.minimum(cap, cut_from))


#: Where within its whole segment a window stands, for the mean of CUBIC's integer target
#: (:func:`next_window`): midpoints of 16 equal parts.
_POSITIONS = (np.arange(16) + 0.5) / 16


def next_window(rules_: StackRules, w, *, r: float, rtt_s: float):
    """The window after one loss-free round in congestion avoidance, in (fractional: a mean)
    segments, vectorized over ``w``: ``w + α`` (Reno), or for CUBIC the kernel's integer target
    or ``w + α``, whichever is larger (RFC 9438 §4.2-4.3).

    CUBIC's window function is ``W(t) = W_max + C(t − K)³`` with ``C·K³ = W_max − w₀`` after a cut
    to ``w₀``; ``W_max`` is :func:`cubic_w_max` (``⌊r⌋ + 2``, or after a cascade's cut its fast
    convergence, ``(w/β)·(1 + β)/2``), and the time since the cut enters
    only through the window reached. ``bictcp_update`` (net/ipv4/tcp_cubic.c) computes the target
    one minimum RTT ahead and in integers, ``W_max − ⌊C(K − t)³⌋`` below ``W_max`` (the cubic
    rounded *up* to a whole segment) and ``W_max + ⌊C(t − K)³⌋`` above it (rounded down), and
    grows one segment per ``⌊cwnd/(target − cwnd)⌋`` ACKs, so a window-limited round reaches the
    target. Hence:

    - a window just cut (``w < β(⌊r⌋ + 2)``) stands at the epoch's start: the first target is
      ``⌈W(RTT)⌉ ≥ w + 1`` (``C(K − RTT)³ < W_max − w``), one whole segment in the round, where
      the continuous cubic gives less than the Reno-friendly 0.53 at RTT 100 ms;
    - a window regrowing below ``W_max`` is ``⌈W(τ)⌉`` for a ``W(τ)`` anywhere in ``(w − 1, w]``
      (taken uniform): the next is the mean of ``⌈W(τ + RTT)⌉`` over it;
    - at or above ``W_max``, ``⌊W(τ + RTT)⌋`` for ``W(τ)`` in ``[w, w + 1)``.

    Measured (docs/experiments/model-fidelity.md, ``benchmarks/linux_cwnd_regrowth.py``): after
    recoveries that end at cwnd 4, Linux's mean cwnd is 4.98 one round trip on, 5.67 at three,
    6.90 at six; the integer arithmetic gives 5, 6, 6–7."""
    w = np.asarray(w, dtype=float)
    reno = w + rules_.ca_growth_segments
    if rules_.cubic_c <= 0:
        return reno
    c = rules_.cubic_c
    cap = _window_cut_from(rules_, r)
    w_max = cubic_w_max(rules_, w, cap)[..., None]
    wc = w[..., None]

    def one_round_on(x):
        """``W(τ + RTT)`` for the ``τ`` at which ``W(τ) = x``."""
        return w_max + c * (np.cbrt((x - w_max) / c) + rtt_s) ** 3

    just_cut = (w / rules_.beta < cap - 1e-9)[..., None]
    below = np.ceil(one_round_on(np.where(just_cut, wc, np.minimum(wc - 1.0 + _POSITIONS, w_max))) - 1e-9)
    above = np.floor(one_round_on(wc + _POSITIONS * (1.0 - 1e-9)) + 1e-9)
    nxt = np.maximum(np.where(wc < w_max - 1e-9, below, above), wc).mean(axis=-1)
    return np.maximum(nxt, reno)
