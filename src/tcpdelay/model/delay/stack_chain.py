"""The window-and-backlog chain of the ``linux`` and ``classic`` stacks.

Same state ``(w, B, l)`` and the same solver as Table 6's chain (:mod:`.chain`), other
transitions (rules and sources in :mod:`.stacks`). What the chain carries here is only what
the *sender* does: how long a packet waits in the send buffer (``B/f``) while the window limits
it. The receiver's part — the lost packet's repair and the packets held behind it — is the
per-loss-episode law of :mod:`.repair`, added to the chain's delays by :func:`.repair.add_hol`;
so no transition here carries Table 6's ``L + RTT + i/f`` delays, and every packet the source
writes is counted once, with delay ``L + B/f`` (``count_fresh_packets``).

| from | event, probability | to | time | packets |
|---|---|---|---|---|
| AL ``(w≥r, 0, 0)`` | none, ``1−p`` | ``(w, 0, 0)``; ``linux`` below ``⌊r⌋+2``: ``(w+1, 0, 0)`` w.p. ``(next(w)−w)/w``; ``classic``: w.p. ``1/w`` | ``1/f`` | 1 at ``L`` |
| | loss, ``p·(1−p_to)`` | ``(max(⌊βw⌋,2), 0, 1)`` | ``1/f`` | 1 at ``L`` |
| | loss, RTO (``classic``), ``p·p_to`` | ``(1, 0, 0)`` | ``1/f`` | 1 at ``L`` |
| NL ``(w, B, 0)`` | none, ``(1−p)^w`` | ``(next(w) or 2w, (B+r−wk)⁺, 0)`` | ``RTT`` | ``min(B, wk)`` at ``L+B/f``, fresh at ``L`` |
| | loss, ``(1−(1−p)^w)(1−p_to)`` | ``(max(⌊βw⌋,2), (B+r−wk)⁺, 1)`` | ``RTT`` | the same |
| | loss, RTO, ``(1−(1−p)^w)·p_to`` | ``(0, (B+r−wk)⁺ + (T0−RTT)f, 1)`` | ``RTT`` | the same |
| FR ``(w, B, 1)`` | none among its ``s·w`` segments sent after the loss was found, ``(1−p)^{sw}`` | ``(w, (B+r−(w−1)k)⁺, 0)`` | ``RTT`` | as a loss-free round with ``w − 1`` new segments (one is the retransmission), no growth; ``linux``: half the fresh packets at ``L + 1/f`` (PRR) |
| | loss among them, ``(1−(1−p)^{sw})(1−p_to)`` | ``(max(⌊βw⌋,2), (B+r−(w−1)k)⁺, 1)``: a new loss event | ``RTT`` | the same |
| | loss, RTO, ``(1−(1−p)^{sw})·p_to`` | ``(0, (B+r−(w−1)k)⁺ + (T0−RTT)f, 1)`` | ``RTT`` | the same |
| TO ``(0, B, l)`` | as Table 6 | | | |

``p_to`` is 0 for ``linux`` (RACK finds a lost retransmission while the source writes) and the
retransmission's loss ``p`` for ``classic`` (RFC 6675 cannot see it; the RTO repairs it). The
window is reduced once per loss event (once per recovery episode, as both stacks do: further
losses of the same round change nothing); a loss among the share ``s`` of the recovery round's
segments sent after the loss was found (:func:`.repair.recovery_round_new_share`) is the next
episode. The recovery round's window carries the retransmission: PRR (RFC 6937;
``tcp_cwnd_reduction``, ns-3's ``TcpPrrRecovery``) counts it among the segments it lets out
(``prr_out``), and the lost segment held its slot until it was marked lost, so ``w − 1`` of the
round's segments carry new data. ``next(w)``
(:func:`.stacks.next_window`: Reno's ``w+1``, CUBIC's window function) is fractional: the
window moves to its two neighbouring integers with probabilities that keep its mean. Slow start (``2w``) only for ``classic`` below ``⌈r⌉``, where its timeouts
restart (``ssthresh``, half a window that grew while application-limited, is above ``r``);
Linux holds ``cwnd = ssthresh`` after every recovery (congestion avoidance).
"""

from __future__ import annotations

import math

import numpy as np

from tcpdelay.model.delay import chain_states as _states
from tcpdelay.model.delay.params import MAX_BACKOFF_STAGE, DelayParams
from tcpdelay.model.delay.repair import recovery_round_new_share
from tcpdelay.model.delay.stacks import app_limited_window_cap, next_window, rules, window_after_loss

_EPS = 1e-9


def edge_builder(params: DelayParams, space: "_states.StateSpace"):
    """``edges_from(src)`` as :func:`tcpdelay.model.delay.chain._edge_builder`, for the
    stack's transitions (module docstring)."""
    R = rules(params.stack)
    f, rtt = params.rate_pps, params.rtt_s
    r = params.r
    k = params.packets_per_segment
    t0f = params.t0_s * f
    W = space.W
    p_nl = _states.segment_loss(params, params.mss_bytes)
    p_al = _states.segment_loss(params, params.packet_bytes)
    rto = R.lost_retransmission == "rto"
    pto_nl = p_nl if rto else 0.0
    pto_al = p_al if rto else 0.0
    ws = np.arange(1, W + 1)
    # P(some loss in a round of w segments), random or correlated loss alike (correlated loss
    # only loses the rest of the round after its first loss, and a round is cut once either way)
    loss_w = -np.expm1(ws * np.log1p(-p_nl)) if p_nl > 0 else np.zeros(W)
    ok_w = 1.0 - loss_w
    w_after = np.minimum(W, np.array([window_after_loss(R, int(w)) for w in ws]))
    # slow start (after a timeout) up to the window the source needs, ``classic`` only
    w_ss = max(1, math.ceil(r - _EPS)) if R.slow_start_after_timeout and rto else 0
    # the share of a recovery round's segments whose loss is a new loss event
    new_share = recovery_round_new_share(R, loss=params.loss, rate_pps=f, rtt_s=rtt)
    # an application-limited window still grows up to this (``linux``: ⌊r⌋ + 2; 0: never)
    w_cap = app_limited_window_cap(R, r)
    rto_extra = max(0.0, params.t0_s - rtt) * f   # the RTO's wait beyond the round, in packets
    # the window after a loss-free round in congestion avoidance, per window (one evaluation of
    # CUBIC's window function for the whole build, not one per breadth-first step)
    w_next = next_window(R, ws, r=r, rtt_s=rtt)

    def edges_from(src_all: np.ndarray):
        parts = _states.EdgeParts()
        add = parts.add

        def round_(src, w2, l2, B, w_now, prob, is_loss=0, b_extra=0.0, wait_share=0.0, new_segments=None):
            """One round of RTT at window ``w_now`` (of which ``new_segments`` carry new data,
            all by default): the backlogged packets that fit leave at
            ``L + B/f``; the packets written during it that fit (zero-time twin edges) wait for
            the ACK clock — ``w_now`` segments a round trip leave one per ACK, ``RTT/w_now``
            apart, each carrying the ``g = fresh/w_now`` packets written since the last (small
            packets coalesce, ``tcp_sendmsg`` appends to the unsent tail): delays
            ``L + (g−1)/f, …, L + 1/f, L`` in every gap; none when a segment goes out per packet."""
            w_now = np.asarray(w_now, dtype=float)
            cap = (w_now if new_segments is None else np.asarray(new_segments, dtype=float)) * k
            b_next = np.maximum(0.0, B + r - cap) + b_extra
            n_b = np.floor(np.minimum(B, cap) + _EPS)
            add(src, w2, b_next, l2, prob, rtt, n=n_b, j0=B, jb=B, is_loss=is_loss)
            fresh = np.maximum(0.0, np.minimum(B + r, cap) - np.minimum(B, cap))
            g = np.where(w_now > 0, fresh / np.maximum(w_now, 1.0), 0.0)
            per_gap = np.floor(g + _EPS)
            gated = per_gap >= 2                     # more than one packet per segment
            ng = np.where(gated, per_gap, 0.0)
            add(src, w2, b_next, l2, prob * np.where(gated, w_now, 0.0), 0.0, n=ng, j0=0.0, jstep=1,
                jb=0.0)
            plain = fresh - np.where(gated, w_now * per_gap, 0.0)
            add(src, w2, b_next, l2, prob * (1.0 - wait_share), 0.0, n=plain)
            if wait_share > 0:   # a recovery round's writes behind PRR's ACK clock: ``1/f`` each
                add(src, w2, b_next, l2, prob * wait_share, 0.0, n=plain, j0=1.0, jb=1.0)

        def rounds(src, B, w_now, outcomes, wait_share=0.0, new_segments=None):
            """The rounds of one batch of states, one per outcome ``(w2, l2, prob, is_loss,
            b_extra)``, as one :func:`round_` over the outcomes stacked: a breadth-first build
            calls this for every step, and one call a kind of state costs a quarter of four."""
            m = len(outcomes)
            col = lambda i: np.concatenate([np.broadcast_to(np.asarray(o[i]), src.shape) for o in outcomes])
            round_(np.tile(src, m), col(0), col(1), np.tile(B, m), np.tile(w_now, m), col(2),
                   is_loss=col(3), b_extra=col(4), wait_share=wait_share,
                   new_segments=None if new_segments is None else np.tile(new_segments, m))

        w_all, B_all, l_all = space.decode(src_all)
        m0 = (w_all > 0) & (l_all == 0)
        wg, Bg, src0 = w_all[m0], B_all[m0], src_all[m0]
        al = (Bg == 0) & (wg >= r - _EPS)

        # (a) application-limited: one packet per 1/f; a loss leaves the sender writing on
        wa, sa = wg[al], src0[al]
        if R.app_limited_growth:   # one segment per window of ACKed segments (RFC 5681 eq 3)
            g = np.where(wa < W, 1.0 / wa, 0.0)
        elif w_cap > 0:            # the flight reaches the window: the per-ACK growth of a round of w
            g = np.where(wa < np.minimum(w_cap, W), np.minimum(1.0, (w_next[wa - 1] - wa) / wa), 0.0)
        if R.app_limited_growth or w_cap > 0:
            add(sa, np.minimum(wa + 1, W), 0.0, 0, (1.0 - p_al) * g, 1.0 / f, n=1.0)
            add(sa, wa, 0.0, 0, (1.0 - p_al) * (1.0 - g), 1.0 / f, n=1.0)
        else:
            add(sa, wa, 0.0, 0, 1.0 - p_al, 1.0 / f, n=1.0)
        add(sa, w_after[wa - 1], 0.0, 1, p_al * (1.0 - pto_al), 1.0 / f, n=1.0, is_loss=1)
        if pto_al > 0:
            add(sa, 1, 0.0, 0, p_al * pto_al, 1.0 / f, n=1.0, is_loss=2)

        # (b) network-limited l = 0: one round of RTT
        nl = ~al
        wn, Bn, sn = wg[nl], Bg[nl].astype(float), src0[nl]
        cap = wn * k
        okp, lossp = ok_w[wn - 1], loss_w[wn - 1]
        ss = wn < w_ss
        # next window: doubling in slow start, else the stack's congestion avoidance; a
        # fractional target splits between its two neighbours keeping the mean
        target = np.where(ss, 2.0 * wn, w_next[wn - 1])
        target = np.minimum(target, W)
        lo = np.floor(target + _EPS)
        frac = np.clip(target - lo, 0.0, 1.0)
        frac = np.where(frac < 1e-9, 0.0, frac)
        lo_i = lo.astype(np.int64)
        outcomes = [(lo_i, 0, okp * (1.0 - frac), 0, 0.0),
                    (np.minimum(lo_i + 1, W), 0, okp * frac, 0, 0.0),
                    (w_after[wn - 1], 1, lossp * (1.0 - pto_nl), 1, 0.0)]
        if pto_nl > 0:   # the retransmission lost too: the RTO, T0 after the round began
            outcomes.append((0, 1, lossp * pto_nl, 2, rto_extra))
        rounds(sn, Bn, wn, outcomes)

        # (c) fast recovery l = 1: one round at the reduced window, no growth. Those of its
        # segments sent after the loss was found (beyond ``high_seq``,
        # :func:`.repair.recovery_round_new_share`) start a new loss event if lost: another
        # reduction once this recovery ends (RFC 6675 §5; ``tcp_fastretrans_alert``)
        m1 = (w_all > 0) & (l_all == 1)
        w1, src1 = w_all[m1], src_all[m1]
        B1 = B_all[m1].astype(float)
        wait = R.recovery_write_wait
        n_new = w1 * new_share                        # of its segments, those beyond high_seq
        ok1 = np.exp(n_new * np.log1p(-p_nl)) if p_nl > 0 else np.ones(w1.size)
        loss1 = 1.0 - ok1
        # one of the round's w segments is the retransmission: w − 1 carry new data
        fresh1 = w1 - 1.0
        outcomes = [(w1, 0, ok1, 0, 0.0), (w_after[w1 - 1], 1, loss1 * (1.0 - pto_nl), 1, 0.0)]
        if pto_nl > 0:
            outcomes.append((0, 1, loss1 * pto_nl, 2, rto_extra))
        rounds(src1, B1, w1, outcomes, wait_share=wait, new_segments=fresh1)

        # (d) timeout stages (classic only reaches them): Table 6's recovery
        # (every stage at once: a timeout state's index orders it by stage, then backlog)
        mt = w_all == 0
        st, lt = src_all[mt], l_all[mt]
        Btf = B_all[mt].astype(float)
        round_(st, 1, 0, Btf, 1, 1.0 - p_nl)
        backoff = 2.0 ** np.minimum(lt, MAX_BACKOFF_STAGE)
        add(st, 0, Btf + backoff * t0f, np.minimum(lt + 1, MAX_BACKOFF_STAGE), p_nl, backoff * params.t0_s)

        return parts.edges()

    return edges_from
