"""A lost packet's repair time and the head-of-line delay it causes (per-loss-episode model).

Why not the chain: Table 6 gives a fast retransmit three delays ``L + RTT + i/f``. What a
receiver sees is exact and simpler. A CBR source writes packet ``n`` at ``n/f``; it reaches the
receiver at ``n/f + L + X_n`` where ``X_n = 0`` if it got through and ``X_n = R`` (its *repair
time*: from its first transmission to the one that arrives) if it was lost. TCP delivers in
order, so packet ``n`` is read at ``max_{m≤n}(m/f + L + X_m)``, and its delay beyond ``L`` is

    H_n = max_{j≥0} (X_{n−j} − j/f)   (with X = 0 this is 0),

a max-plus (Lindley-type) recursion ``H_n = max(X_n, H_{n−1} − 1/f)``. For independent ``X``
its stationary law is a product (each term must stay below ``h``):

    P(H ≤ h) = ∏_{j≥0} P(X ≤ h + j/f) = ∏_{j≥0} (1 − p + p·P(R ≤ h + j/f)).

That is every packet held behind a loss — the whole ramp of ``f·R`` packets, overlapping losses
included — without a state per packet. The law of ``R`` follows the stack
(:mod:`tcpdelay.model.delay.stacks`):

- ``linux``: if the source writes nothing before the tail loss probe fires
  (:func:`tail_probe_s`: ``min(2·SRTT + 200 ms, RTO)`` with one packet out), the probe resends
  the lost packet (RFC 8985 §7); otherwise RACK marks the packet lost when the first later packet that gets through (the
  ``k1``-th, ``P = (1−p)p^{k1−1}``) is SACKed, at ``RTT + k1/f``, but not before
  ``RTT + reo_wnd`` (``reo_wnd = min_rtt/4``), and at once when ``reordering`` = 3 later packets
  are SACKed (the ``k3``-th at ``RTT + k3/f``): detection ``RTT + min(max(k1/f, reo_wnd), k3/f)``
  (RFC 8985 §6.2, ``tcp_rack_detect_loss``, ``tcp_rack_reo_wnd``). While another loss is in
  recovery ``reo_wnd = 0``: a loss is in recovery with probability ``1 − (1−p)^n``, ``n`` the
  packets sent in the round trip and detection time before it. A lost retransmission (``p``) is
  marked when the first packet written after it that gets through is SACKed (``reo_wnd = 0``),
  and sent again then — unless no packet written after it can leave before its ACK (PRR's
  ACK clock with nothing else in flight, :func:`_ack_clock_stalls`): then the RTO resends it,
  ``T0`` later, backed off if lost again.
- ``classic``: three duplicate ACKs: detection ``RTT + k3/f`` (RFC 6675). A lost
  retransmission waits for the RTO, restarted by the last ACK that advanced
  (``RTT − 1/f`` after the loss, RFC 6298 §5.3; at the loss if that is earlier, §5.1): resent at
  ``max(t, max(RTT − 1/f, 0) + T0)``, then
  ``2·T0``, ``4·T0`` … later (§5.5).

**The drain after an RTO**: the packets written while PRR's ACK clock stalled wait at the
sender, and after the RTO they leave at the post-timeout window (1, then ``ssthresh`` = 2:
``2k`` packets a round trip with ``k`` packets a segment), not as fast as they were written. So
the ``j``-th packet behind a repair the RTO sent is held ``R − j·(1/f − RTT/(2k))``, not
``R − j/f`` (:func:`rto_drain_stride`; :func:`hol_pmf` takes that part of the law with its own
stride). Video at RTT 20 ms (``k`` = 1) holds twice the packets VoIP (``k`` = 9) holds. Both
stacks: for ``linux`` the stall is what sends the repair to the RTO; ``classic`` resends every
lost retransmission by the RTO, and the packets behind it wait at the sender where the clock
stalled (:func:`_ack_clock_stalls`'s share) and always behind a lost RTO retransmission (the
timeout's window of one sends nothing else).

"Later packets" are later *transmissions*: while a window of ``w`` segments below ``f·RTT``
limits the sender, packets coalesce and segments leave ``RTT/w`` apart, and the law is taken at
that spacing and mixed over the chain's windows (:func:`repair_time_mixture`).

Approximations, stated: the ``X_n`` of neighbouring lost packets are not independent (a burst
shares one detection), which matters at ``p²``; packets leave the sender ``1/f`` apart (a
backlogged sender sends in bursts; its wait is the chain's part, added independently by
:func:`add_hol`).

Everything is on a grid of ``Δ = 1/(f·m)`` seconds (``m`` the smallest integer with
``Δ ≤ 1 ms``), so that every ``j/f`` is a grid point; RTT, the reordering window and ``T0`` are
rounded to it (≤ 0.5 ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sp_fft
from scipy.special import gammaln

from tcpdelay.model.delay.stacks import StackRules, window_after_loss

GRID_MAX_STEP_S = 1e-3
"""The time grid's coarsest step (s)."""
TAIL_TOL = 1e-13
"""Mass below which a geometric tail or a retransmission round is cut."""
MAX_RETRANSMISSIONS = 40
_NEGLIGIBLE = 1e-18
"""A retransmission time's mass below which it is not followed further (far below TAIL_TOL)."""
"""Retransmission rounds followed (each lost with ``p``: ``p^40`` is far below ``TAIL_TOL``)."""


def grid_substeps(rate_pps: float) -> int:
    """``m``: grid points per packet interval, the smallest with ``1/(f·m) ≤ 1 ms``."""
    return max(1, math.ceil(1.0 / (rate_pps * GRID_MAX_STEP_S) - 1e-9))


def _nbinom_pmf(k: np.ndarray, n: int, p: float) -> np.ndarray:
    """P(the ``n``-th delivered packet is the ``k``-th after the lost one), delivery ``1−p``:
    ``C(k−1, n−1) (1−p)^n p^(k−n)`` for ``k ≥ n``."""
    k = np.asarray(k, float)
    ok = k >= n
    if p <= 0:
        return np.where(k == n, 1.0, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        logc = gammaln(np.maximum(k, 1)) - gammaln(n) - gammaln(np.maximum(k - n + 1, 1))
        logp = logc + n * math.log1p(-p) + (k - n) * math.log(p)
    return np.where(ok, np.exp(np.where(ok, logp, -np.inf)), 0.0)


def _tail_length(p: float) -> int:
    """Packets after which ``p^k`` is below :data:`TAIL_TOL`."""
    if p <= 0:
        return 4
    return int(math.ceil(math.log(TAIL_TOL) / math.log(p))) + 4


def detection_offsets(rules: StackRules, *, loss: float, rate_pps: float, reo_wnd_s: float):
    """Law of the detection time beyond one RTT, as (offsets in s, probabilities).

    ``rack``: ``min(max(k1/f, reo_wnd), k3/f)``, where waiting out ``reo_wnd`` takes the
    reordering timer's ticks (:func:`reo_timer_s`); ``dupack``: ``k3/f`` (``k1``, ``k3``: the
    first and the ``dupthresh``-th later packet that gets through)."""
    p, u, n = float(loss), 1.0 / rate_pps, rules.dupthresh
    K = _tail_length(p) + n
    k = np.arange(1, K + 1)
    if rules.detection == "dupack":
        return k * u, _nbinom_pmf(k, n, p)
    m = int(math.floor(reo_wnd_s * rate_pps + 1e-9))   # later packets sent within reo_wnd
    off, prob = [], []
    # k1 > m: nothing arrived within the window; detection at k1/f (k3 > k1)
    k1 = k[k > m]
    off.append(k1 * u)
    prob.append(_nbinom_pmf(k1, 1, p))
    if m >= 1:
        # dupthresh reached within the window: at k3/f
        k3 = k[(k >= n) & (k <= m)]
        off.append(k3 * u)
        prob.append(_nbinom_pmf(k3, n, p))
        # 1 .. n-1 of the m arrived: RACK's reordering timer, armed at the first SACK (the
        # k1-th packet, k1 <= m) for the rest of the window; fewer than n-1 more arrive in it
        k1 = np.arange(1, m + 1)
        more = np.zeros(k1.size)
        for j, kk in enumerate(k1):
            x = np.arange(0, n - 1)
            x = x[x <= m - kk]
            logc = gammaln(m - kk + 1) - gammaln(x + 1) - gammaln(m - kk - x + 1)
            more[j] = np.exp(logc + x * math.log1p(-p) + (m - kk - x) * math.log(p)).sum() if p > 0 \
                else float(m - kk < n - 1)
        w = _nbinom_pmf(k1, 1, p) * more
        off.append(k1 * u + reo_timer_s(reo_wnd_s - k1 * u, rules.timer_hz))
        prob.append(w)
    return np.concatenate(off), np.concatenate(prob)


def recovery_round_new_share(rules: StackRules, *, loss: float, rate_pps: float, rtt_s: float) -> float:
    """The share of a recovery round's segments sent after the loss was found, whose own losses
    are therefore a new loss event (beyond ``high_seq``: ``tcp_fastretrans_alert`` enters
    recovery again when the episode ends with segments marked lost; RFC 6675 §5, one recovery
    per ``RecoveryPoint``). The first loss of a round sits at a uniform ``x·RTT`` into it and
    is found ``RTT + D`` later (:func:`detection_offsets`), so of the next round, ``[RTT, 2·RTT)``,
    the part after ``x·RTT + RTT + D`` is ``max(0, 1 − x − D/RTT)``; over ``x``:
    ``E[max(0, 1 − D/RTT)²] / 2``. At RTT 20 ms (``D ≥ 1/f = RTT``) none; at 100 ms about a
    fifth; at 300 ms about a third."""
    off, prob = detection_offsets(rules, loss=loss, rate_pps=rate_pps,
                                  reo_wnd_s=rules.reo_wnd_fraction * rtt_s)
    if prob.sum() <= 0:
        return 0.0
    part = np.maximum(0.0, 1.0 - off / rtt_s) ** 2 / 2.0
    return float(np.dot(prob, part) / prob.sum())


def reo_timer_s(remaining_s, timer_hz: float):
    """When RACK's reordering timer fires, ``remaining_s`` after the SACK that armed it:
    ``tcp_rack_mark_lost`` arms ``usecs_to_jiffies(remaining) + TCP_TIMEOUT_MIN`` (2 jiffies)
    and a timer fires on a tick, so ``(⌈remaining/j⌉ + 2)·j`` minus half a tick on average,
    ``j = 1/HZ`` (4 ms at this kernel's HZ = 250: RTT 100 ms, 50 packets/s fires 14 ms after the
    SACK, not 5; measured RTT + 29-34 ms). ``timer_hz = inf`` gives the RFC's ``remaining``."""
    r = np.maximum(np.asarray(remaining_s, dtype=float), 0.0)
    if not math.isfinite(timer_hz):
        return r
    j = 1.0 / timer_hz
    return np.where(r > 0, (np.ceil(r / j - 1e-9) + 2) * j - j / 2, 0.0)


def tail_probe_s(*, rtt_s: float, rate_pps: float, t0_s: float) -> float:
    """When Linux's tail loss probe fires after the last transmission (RFC 8985 §7.2,
    ``tcp_schedule_loss_probe``): ``PTO = 2·SRTT``, plus ``TCP_RTO_MIN`` (200 ms) when one
    segment is out (a source that writes less than one packet a round trip) or
    ``TCP_TIMEOUT_MIN`` (2 ms) otherwise, and never after the RTO (``min(PTO, RTO)``). Every
    transmission re-arms it (``tcp_write_xmit``), so it fires only if the source's interval is
    longer: then the probe resends the last packet, the lost one, and repairs it."""
    one_out = rate_pps * rtt_s < 1.0
    pto = 2.0 * rtt_s + (0.2 if one_out else 0.002)
    return min(pto, t0_s)


def repair_time_pmf(rules: StackRules, *, loss: float, rate_pps: float, rtt_s: float, t0_s: float,
                    min_rtt_s: float | None = None, substeps: int | None = None,
                    send_rate_pps: float | None = None,
                    recovery_send_rate_pps: float | None = None) -> np.ndarray:
    """P(R = i·Δ) for i = 0, 1, …: a lost packet's repair time on the grid (module docstring).

    ``loss`` is the probability that a packet (first transmission or retransmission) is lost;
    ``min_rtt_s`` sets RACK's reordering window [default ``rtt_s``]. Sums to 1 up to the cut
    tails (< 1e-12).

    ``send_rate_pps`` is how many transmissions (segments) per second follow the lost one
    [default ``rate_pps``], ``recovery_send_rate_pps`` the same after a retransmission [default
    ``send_rate_pps``]. Both stacks find a loss by what they learn of *later transmissions*
    (RACK: a later-sent segment SACKed, ``tcp_rack_detect_loss``; RFC 6675: segments SACKed
    above the hole), not by later writes. While each packet leaves as its own segment these
    come ``1/f`` apart; while a window of ``w`` segments below ``f·RTT`` limits the sender, the
    packets written meanwhile coalesce (``tcp_sendmsg`` appends to the unsent tail) and leave
    one segment per ACK, ``RTT/w`` apart (:func:`transmission_rate_pps`)."""
    return _assemble(_repair_pieces(rules, loss=loss, rate_pps=rate_pps, rtt_s=rtt_s, t0_s=t0_s,
                                    min_rtt_s=min_rtt_s, substeps=substeps, send_rate_pps=send_rate_pps,
                                    recovery_send_rate_pps=recovery_send_rate_pps))


def _assemble(pieces: list[tuple[int, np.ndarray]]) -> np.ndarray:
    """A law on the grid from ``(first grid index, masses)`` pieces, added up."""
    top = max((off + arr.size for off, arr in pieces), default=0)
    out = np.zeros(top)
    for off, arr in pieces:
        out[off: off + arr.size] += arr
    return out


def _repair_pieces(rules: StackRules, *, loss: float, rate_pps: float, rtt_s: float, t0_s: float,
                   min_rtt_s: float | None, substeps: int | None, send_rate_pps: float | None,
                   recovery_send_rate_pps: float | None) -> list[tuple[int, np.ndarray]]:
    """:func:`repair_time_pmf`'s law as ``(first grid index, masses)`` pieces, not yet added up
    (a backed-off RTO puts a piece minutes out; :func:`repair_time_mixture` adds every window's
    pieces into one array)."""
    p, f = float(loss), float(rate_pps)
    if not p > 0:
        return [(0, np.ones(1))]   # nothing is lost: no repair (R = 0, never used)
    g = _Grid.of(rules, loss=p, rate_pps=f, rtt_s=rtt_s, t0_s=t0_s, substeps=substeps,
                 send_rate_pps=send_rate_pps, recovery_send_rate_pps=recovery_send_rate_pps)
    return _retransmission_rounds(rules, _first_repair(rules, g, min_rtt_s=min_rtt_s), g)


@dataclass(frozen=True)
class _Grid:
    """One law's quantities in grid steps of ``dt = 1/(f·m)`` seconds."""
    p: float
    f: float
    dt: float
    rtt_s: float
    t0_s: float
    send: float        # transmissions per second after the loss
    u0_i: int          # … their spacing in grid steps
    u_i: int           # the spacing of transmissions after a retransmission
    rtt_i: int
    t0_i: int
    rto_first: int     # when the RTO first fires after the loss

    @classmethod
    def of(cls, rules: StackRules, *, loss: float, rate_pps: float, rtt_s: float, t0_s: float,
           substeps: int | None, send_rate_pps: float | None, recovery_send_rate_pps: float | None) -> "_Grid":
        f = float(rate_pps)
        m = substeps or grid_substeps(f)
        dt = 1.0 / (f * m)
        send = float(send_rate_pps or f)
        again = float(recovery_send_rate_pps or send)
        u0_i = max(1, int(round(1.0 / (send * dt))))
        rtt_i = int(round(rtt_s / dt))
        t0_i = int(round(t0_s / dt))
        # the RTO timer was restarted by the last ACK that advanced (the previous transmission's,
        # RTT − 1/f after the loss when each packet is a segment) or, if that came before it,
        # started when the lost packet was sent
        return cls(p=float(loss), f=f, dt=dt, rtt_s=float(rtt_s), t0_s=float(t0_s), send=send, u0_i=u0_i,
                   u_i=max(1, int(round(1.0 / (again * dt)))), rtt_i=rtt_i, t0_i=t0_i,
                   rto_first=max(0, rtt_i - u0_i) + t0_i)


def _first_repair(rules: StackRules, g: _Grid, *, min_rtt_s: float | None) -> np.ndarray:
    """The law of the first retransmission's time (grid steps from the loss): detection
    (RACK, the tail loss probe or three duplicate ACKs), or the RTO if that comes first."""
    p, f, dt, rtt_s, t0_s, send = g.p, g.f, g.dt, g.rtt_s, g.t0_s, g.send
    rtt_i, rto_first = g.rtt_i, g.rto_first
    start = np.zeros(0)

    def add(pmf: np.ndarray, offsets_s: np.ndarray, probs: np.ndarray, weight: float) -> np.ndarray:
        # the RTO repairs a loss that nothing later detects first (RFC 6298 §5.4)
        idx = np.minimum(rtt_i + np.rint(offsets_s / dt).astype(np.int64), rto_first)
        top = int(idx.max(initial=0)) + 1
        if pmf.size < top:
            pmf = np.concatenate([pmf, np.zeros(top - pmf.size)])
        np.add.at(pmf, idx, weight * probs)
        return pmf

    u_s = 1.0 / f
    if rules.detection == "rack" and u_s > tail_probe_s(rtt_s=rtt_s, rate_pps=f, t0_s=t0_s):
        # a tail loss: nothing is written before the probe fires; it resends the lost packet
        start = add(start, np.array([tail_probe_s(rtt_s=rtt_s, rate_pps=f, t0_s=t0_s) - rtt_s]), np.ones(1), 1.0)
    elif rules.detection == "rack":
        reo = rules.reo_wnd_fraction * (rtt_s if min_rtt_s is None else min_rtt_s)
        off0, pr0 = detection_offsets(rules, loss=p, rate_pps=send, reo_wnd_s=reo)
        off1, pr1 = detection_offsets(rules, loss=p, rate_pps=send, reo_wnd_s=0.0)
        typical = min(max(1.0 / send, reo), rules.dupthresh / send)
        n_before = int(round(send * (rtt_s + typical)))
        in_recovery = -math.expm1(n_before * math.log1p(-p)) if p > 0 else 0.0
        start = add(start, off0, pr0, 1.0 - in_recovery)
        start = add(start, off1, pr1, in_recovery)
    else:
        off, pr = detection_offsets(rules, loss=p, rate_pps=send, reo_wnd_s=0.0)
        start = add(start, off, pr, 1.0)
    return start


def _retransmission_rounds(rules: StackRules, start: np.ndarray, g: _Grid,
                           rto_pieces: list | None = None) -> list[tuple[int, np.ndarray]]:
    """The repair-time law, as pieces, from the first retransmission's law ``start``: each
    retransmission is lost with ``p`` and found again by RACK or the RTO (module docstring).
    For ``rack`` it depends on ``start`` and the spacing after a retransmission only (``u_i``),
    not on how the first loss was found, so laws with one ``u_i`` can share one run."""
    p, u_i, rtt_i, t0_i, rto_first = g.p, g.u_i, g.rtt_i, g.t0_i, g.rto_first
    # Retransmission rounds: ``pending`` is the law of the time of the current retransmission,
    # ``after_rto`` the same for retransmissions the RTO sent (back-off ``backoffs`` times).
    # Each law is a ``(first grid index, masses)`` pair: a backed-off RTO shifts a law by
    # ``T0·2^k`` (256 s at k = 9), and dense arrays from 0 would be mostly zeros. ``out``
    # collects the delivered pieces and is added up once at the end.
    pieces: list[tuple[int, np.ndarray]] = []
    pending = (0, start)
    after_rto: list[tuple[int, np.ndarray]] = []
    geo_len = _tail_length(p)
    geo = (1 - p) * p ** np.arange(geo_len)   # first delivered among packets written after
    steps = np.arange(geo_len)[None, :]

    def law_of(tgt: np.ndarray, w: np.ndarray) -> tuple[int, np.ndarray]:
        # the masses ``w`` at grid indices ``tgt`` (same shape), as a law from its first index
        lo = int(tgt.min())
        return lo, np.bincount((tgt - lo).ravel(), weights=np.asarray(w).ravel())

    empty = (0, np.zeros(0))
    # ``rto`` stacks: the part of ``pending`` behind which PRR's ACK clock stalled (the packets
    # written meanwhile wait at the sender: :func:`rto_drain_stride`), for ``rto_pieces``
    stalled = empty
    for r_round in range(MAX_RETRANSMISSIONS):
        for off, arr in [pending] + after_rto:
            if arr.size:
                pieces.append((off, (1 - p) * arr))
        if rto_pieces is not None:
            rto_pieces += [(off, (1 - p) * arr) for off, arr in after_rto + [stalled] if arr.size]
        if p * (pending[1].sum() + sum(a.sum() for _, a in after_rto)) < TAIL_TOL:
            break
        nxt = empty
        nxt_rto: list[tuple[int, np.ndarray]] = [empty for _ in range(len(after_rto) + 1)]
        # a retransmission the RTO sent, lost again: the RTO once more, backed off (RFC 6298 §5.5)
        for k, (off, a) in enumerate(after_rto):
            lost_again = np.where(p * a > _NEGLIGIBLE, p * a, 0.0)
            i = np.flatnonzero(lost_again)
            if i.size:
                nxt_rto[k + 1] = (off + int(i[0]) + t0_i * 2 ** (k + 1), lost_again[i[0]: i[-1] + 1])
        off, lost = pending[0], p * pending[1]
        rel = np.flatnonzero(lost > _NEGLIGIBLE)
        idx = rel + off
        if idx.size and rules.lost_retransmission == "rack":
            # RACK finds it when a segment sent after it is SACKed: j* = floor(t/u) + 1, then
            # geometric — unless PRR holds every new packet back (:func:`_ack_clock_stalls`)
            stall = _ack_clock_stalls(idx, rtt_i=rtt_i, u_i=u_i, loss=p)
            jstar = idx // u_i + 1
            tgt = (jstar[:, None] + steps) * u_i + rtt_i
            nxt = law_of(tgt, (lost[rel] * (1 - stall))[:, None] * geo[None, :])
            nxt_rto[0] = law_of(idx + t0_i, lost[rel] * stall)
        elif idx.size:
            back = t0_i * (2 ** r_round)
            first = (np.where(idx < rto_first, rto_first, idx + t0_i) if r_round == 0
                     else idx + back)
            nxt = law_of(first, lost[rel])
            if rto_pieces is not None:
                # the RTO resends every lost retransmission here; the packets written after the
                # first one wait at the sender if PRR's ACK clock stalled (as for ``rack``), after
                # a lost RTO retransmission always (the timeout's window of one holds them)
                share = _ack_clock_stalls(idx, rtt_i=rtt_i, u_i=u_i, loss=p) if r_round == 0 else 1.0
                stalled = law_of(first, lost[rel] * share)
        else:
            stalled = empty
        pending = nxt
        after_rto = [x for x in nxt_rto if x[1].size]
        if rules.lost_retransmission != "rack":
            after_rto = []
    return pieces


def transmission_rate_pps(window_segments, *, rate_pps: float, rtt_s: float):
    """Segments a sender transmits per second at a window of ``w`` segments, vectorized:
    ``min(f, w/RTT)``. An application-limited sender (``w ≥ f·RTT``) sends each packet as it
    is written; a window below that sends ``w`` segments a round trip, one per ACK, the packets
    written meanwhile coalesced into them. A window of 0 (the chain's timeout states) is the
    RTO's window of one segment (RFC 5681 §3.1)."""
    w = np.maximum(np.asarray(window_segments, dtype=float), 1.0)
    return np.minimum(float(rate_pps), w / float(rtt_s))


def repair_time_mixture(rules: StackRules, windows, shares, *, loss: float, rate_pps: float,
                        rtt_s: float, t0_s: float, substeps: int | None = None,
                        rto_part: list | None = None) -> np.ndarray:
    """The repair-time law of a lost packet over the windows the sender spends its time at.

    ``windows`` (segments) and ``shares`` (their time shares, the chain's stationary law:
    :func:`tcpdelay.model.delay.distribution.window_time_shares`): a packet is lost with the
    same probability at every window, so a lost packet meets window ``w`` with its time share.
    At ``w`` the transmissions after the loss come at :func:`transmission_rate_pps` of ``w``,
    and after its retransmission at that of the window the loss leaves
    (:func:`tcpdelay.model.delay.stacks.window_after_loss`: PRR brings the flight down to it
    within the recovery round, RFC 6937). Windows at or above ``f·RTT`` share one law, the
    packet-by-packet one. The mixture of :func:`repair_time_pmf`'s."""
    f, rtt = float(rate_pps), float(rtt_s)
    w = np.maximum(np.asarray(windows, dtype=np.int64), 1)
    share = np.asarray(shares, dtype=float)
    if w.shape != share.shape or not share.sum() > 0:
        raise ValueError("windows and shares must be arrays of one shape with a positive sum")
    send = transmission_rate_pps(w, rate_pps=f, rtt_s=rtt)
    after = transmission_rate_pps([window_after_loss(rules, int(x)) for x in w], rate_pps=f, rtt_s=rtt)
    laws: dict[tuple[float, float], float] = {}
    for a, b, s in zip(send, after, share):
        if s > 0:
            laws[(float(a), float(b))] = laws.get((float(a), float(b)), 0.0) + float(s)
    if not float(loss) > 0:
        return np.ones(1)
    total = sum(laws.values())
    # The first retransmission's law per (a, b), weighted; then the rounds after it, once per
    # group that shares them: for RACK every law of one ``b`` (one spacing after a
    # retransmission), for the RTO's rounds each law (its first RTO depends on ``a`` too).
    groups: dict[object, tuple[_Grid, np.ndarray]] = {}
    for (a, b), s in laws.items():
        g = _Grid.of(rules, loss=loss, rate_pps=f, rtt_s=rtt, t0_s=t0_s, substeps=substeps,
                     send_rate_pps=a, recovery_send_rate_pps=b)
        first = (s / total) * _first_repair(rules, g, min_rtt_s=None)
        key = g.u_i if rules.lost_retransmission == "rack" else (a, b)
        if key in groups:
            first = _assemble([(0, groups[key][1]), (0, first)])
        groups[key] = (groups.get(key, (g,))[0], first)
    rto_pieces: list | None = [] if rto_part is not None else None
    out = _assemble([piece for g, first in groups.values()
                     for piece in _retransmission_rounds(rules, first, g, rto_pieces)])
    # cut the tail holding less than TAIL_TOL of the mass, as the geometric tails are cut: a
    # window of one or two segments backs its lost retransmissions off to ``T0·2^k`` (256 s at
    # k = 9, mass ~p^9), which would make every later step work over minutes of 1-ms grid
    survival = np.cumsum(out[::-1])[::-1]
    keep = np.flatnonzero(survival >= TAIL_TOL)
    out = out[: keep[-1] + 1] if keep.size else out
    if rto_part is not None:
        # (None where the RTO's part is below the tails cut: the one-law product then)
        mass = sum(float(a.sum()) for _, a in rto_pieces or [])
        if mass > TAIL_TOL:
            rto = _assemble([(o, a) for o, a in rto_pieces if o < out.size])
            rto_part.append(np.pad(rto, (0, max(0, out.size - rto.size)))[: out.size])
        else:
            rto_part.append(None)
    return out


def _ack_clock_stalls(t_idx: np.ndarray, *, rtt_i: int, u_i: int, loss: float) -> np.ndarray:
    """P(no packet written after a retransmission at grid time ``t`` can be sent before its ACK).

    PRR (RFC 6937, ``tcp_cwnd_reduction``) sets ``cwnd = in_flight + sndcnt`` at each ACK that
    delivers something, and only then: a new packet leaves only upon an ACK. Once the
    retransmission is out, the ACKs still to come are those of the packets written within the
    last round trip before it — write instants ``j/f`` in ``(t − RTT, t)`` — that got through. If
    there are none (one packet a round trip or fewer), nothing new is sent before the
    retransmission's own ACK; a lost retransmission then has no later SACK to reveal it and waits
    for the RTO (on Linux at RTT 20 ms, 50 packets/s, about half the lost retransmissions end in
    an RTO: docs/experiments/model-fidelity.md). A write at the very instant of the detecting
    ACK (``t = j/f``) is a race, counted half."""
    t = np.asarray(t_idx, dtype=np.int64)
    lo = t - rtt_i                                      # write instants strictly inside (lo, t)
    first = np.maximum(lo // u_i + 1, 1)
    last = np.where(t % u_i == 0, t // u_i - 1, t // u_i)
    n_in = np.maximum(last - first + 1, 0)
    stall = loss ** n_in
    boundary = (t % u_i == 0) & (t // u_i >= 1)
    return np.where(boundary, stall * (0.5 + 0.5 * loss), stall)


def _sum_log_factors(survival: np.ndarray, p: float, stride: int, n: int) -> np.ndarray:
    """``Σ_{j≥0} log(1 − p·S(i + j·stride))`` for ``i = 0 … n−1`` (``S`` = 0 beyond its end)."""
    n_pad = int(math.ceil(max(n, survival.size) / stride)) * stride
    G = np.ones(n_pad)
    G[: survival.size] = 1.0 - p * survival
    logG = np.log(np.maximum(G, 1e-300))
    if stride == 1:
        return np.cumsum(logG[::-1])[::-1][:n]
    logG = logG.reshape(-1, stride)                            # rows: j, columns: residue
    return np.cumsum(logG[::-1], axis=0)[::-1].ravel()[:n]    # S[i] = sum_j logG[i + j stride]


def hol_pmf(repair_pmf: np.ndarray, *, loss: float, substeps: int, rto_pmf: np.ndarray | None = None,
            rto_stride: int | None = None) -> np.ndarray:
    """P(H = i·Δ): the head-of-line delay beyond ``L`` of a packet (module docstring),
    ``P(H ≤ h) = ∏_{j≥0} (1 − p + p·P(R ≤ h + j/f))`` with ``j/f = j·substeps`` grid steps.

    ``rto_pmf`` (the part of ``repair_pmf`` whose repair the RTO sent) with ``rto_stride``: the
    packets behind such a repair drain ``rto_stride`` grid steps apart, not ``1/f``, so the
    ``j``-th after it is held ``R − j·rto_stride``: ``P(H ≤ h) ≈ ∏_j (1 − p·S_a(h + j/f))·
    ∏_j (1 − p·S_b(h + j·rto_stride))`` with ``S_a``, ``S_b`` the two parts' survival masses
    (exact to ``p²·S_a·S_b``)."""
    p, m = float(loss), int(substeps)
    if p <= 0 or repair_pmf.size == 0:
        return np.ones(1)
    total = max(repair_pmf.sum(), 1e-300)
    n = repair_pmf.size
    if rto_pmf is None or rto_stride is None or not rto_pmf.sum() > TAIL_TOL * total:
        FR = np.minimum(np.cumsum(repair_pmf) / total, 1.0)
        S = _sum_log_factors(1.0 - FR, p, m, n)
    else:
        b = rto_pmf[:n] / total
        a = repair_pmf / total - b
        Sa = np.maximum(a.sum() - np.cumsum(a), 0.0)
        Sb = np.maximum(b.sum() - np.cumsum(b), 0.0)
        S = _sum_log_factors(Sa, p, m, n) + _sum_log_factors(Sb, p, max(1, int(rto_stride)), n)
    F = np.exp(S)
    F[-1] = 1.0
    pmf = np.diff(np.concatenate([[0.0], F]))
    pmf = np.maximum(pmf, 0.0)
    last = np.flatnonzero(pmf > 0)
    return pmf[: last[-1] + 1] if last.size else np.ones(1)


def add_hol(support_s: np.ndarray, pmf: np.ndarray, one_way_s: float, hol: np.ndarray, step_s: float):
    """The delay ``L + S + H`` with the chain's ``S`` (``support_s − L``, on the packet lattice)
    and ``H`` (``hol`` on the grid of ``step_s``) independent: their convolution, as
    (support_s, pmf) without zero entries."""
    s_idx = np.rint((np.asarray(support_s) - one_way_s) / step_s).astype(np.int64)
    s_idx = np.maximum(s_idx, 0)
    top = int(s_idx.max(initial=0)) + 1
    base = np.zeros(top)
    np.add.at(base, s_idx, pmf)
    if hol.size == 1:
        out = base
    elif base.size * hol.size < 4_000_000:
        out = np.convolve(base, hol)
    else:
        out = _fft_convolve(base, hol)
    out = np.where(out > 1e-16, out, 0.0)
    keep = np.flatnonzero(out)
    vals = one_way_s + keep * step_s
    mass = out[keep]
    return vals, mass / mass.sum()


def _fft_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The full linear convolution of two real arrays by FFT, as ``scipy.signal.fftconvolve``
    computes it (real transforms of the next fast length, cut to ``len(a) + len(b) − 1``).
    Here because importing ``scipy.signal`` takes about a second, most of a ``tcpdelay delay``
    command's time; ``scipy.fft`` takes a third of that."""
    n = a.size + b.size - 1
    size = sp_fft.next_fast_len(n, real=True)
    return sp_fft.irfft(sp_fft.rfft(a, size) * sp_fft.rfft(b, size), size)[:n]


def rto_drain_stride(rules: StackRules, *, rate_pps: float, rtt_s: float, packets_per_segment: float,
                     substeps: int) -> int | None:
    """Grid steps between the releases of the packets held behind a repair the RTO sent, or None
    where they drain as fast as they were written (``1/f``).

    While PRR's ACK clock stalls (:func:`_ack_clock_stalls`) the packets written after the lost
    retransmission wait at the sender; after the RTO the window is 1, then ``ssthresh`` = 2
    (``bictcp_recalc_ssthresh``'s floor; RFC 5681 §3.1), so they leave ``k·2`` packets a round
    trip (``k`` packets coalesced per segment): the ``j``-th ``j·(1/f − RTT/(2k))`` earlier than
    the hold, not ``j/f``. Both stacks (``classic``'s RTO after a cut is ns-3's
    ``TcpLinuxReno::GetSsThresh`` floor of two segments), and only where the source writes at
    most one packet a round trip (``f·RTT ≤ 1``,
    the stall of :func:`_ack_clock_stalls` with nothing in flight): there the backlog is a few
    round trips' writes and drains within a few rounds at that window. Where more is written a
    round trip (stalls of small windows with coalesced packets, e.g. VoIP at RTT 300 ms) the
    backlog takes tens of rounds, over which the window's growth, not modelled here, sets the
    drain: the one-law product stands there."""
    if float(rate_pps) * float(rtt_s) > 1.0 + 1e-9:
        return None
    f, k = float(rate_pps), max(1, int(packets_per_segment))    # whole packets a segment carries
    drain = 2.0 * k / float(rtt_s)
    if drain <= f:
        return None
    dt = 1.0 / (f * substeps)
    return max(1, int(round((1.0 / f - 1.0 / drain) / dt)))
