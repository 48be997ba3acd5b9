"""An independent Monte Carlo walk of the delay chain — a check of the solver.

This module re-derives every transition of Table 6 — and of the ``linux`` and ``classic``
stacks' window-and-backlog chain (:mod:`.stack_chain`, from the rules as
:mod:`.stacks` states them: CUBIC's β = 717/1024, C = 0.4 and Reno-friendly α, Reno's halving, the
RTO on a lost retransmission) — for one state at a time with plain ``math`` (no NumPy, no
shared code with :mod:`.chain` or :mod:`.stack_chain` apart from the parameter object), walks
the chain for many steps and records every delivered packet's delay (for the stacks: its
sender-side delay ``L + B/f``; the receiver's head-of-line part is :mod:`.repair`'s). Its estimates must agree
with :func:`tcpdelay.model.delay.predict` within their confidence intervals; the tests check
that, and also compare each row of the sparse matrix with :func:`transitions` state by state.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache

from tcpdelay.model.delay.params import MAX_BACKOFF_STAGE, DelayParams

EPS = 1e-9


def _pmf(i: int, n: int, p: float) -> float:
    if i < 0 or i > n:
        return 0.0
    return math.comb(n, i) * p**i * (1 - p) ** (n - i)


def _to_random(w: int, p: float, lt: bool) -> float:
    """P(timeout): fewer than 3 of w segments arrive, at least one lost (limited transmit
    weighs 1 or 2 arrivals by their new segments' fates)."""
    f1 = 1 - (1 - p) ** 2 if lt else 1.0
    f2 = p * p if lt else 1.0
    return (_pmf(w, w, p) + (_pmf(w - 1, w, p) * f1 if w > 1 else 0.0)
            + (_pmf(w - 2, w, p) * f2 if w > 2 else 0.0))


def _to_random_al(w: int, p: float, lt: bool) -> float:
    """First segment lost; j of the other w-1 lost too."""
    f1 = 1 - (1 - p) ** 2 if lt else 1.0
    f2 = p * p if lt else 1.0
    return p * ((_pmf(w - 1, w - 1, p) if w > 1 else 1.0) + (_pmf(w - 2, w - 1, p) * f1 if w > 1 else 0.0)
                + (_pmf(w - 3, w - 1, p) * f2 if w > 2 else 0.0))


def _h(k: int, p: float, lt: bool) -> float:
    if k <= 2:
        if not lt:
            return 1.0
        return (1.0, 1.0 - (1 - p) ** 2, p)[k]
    return sum(math.comb(k, m) * (1 - p) ** m * p ** (k - m) for m in range(3))


def _q_hat(w: int, p: float, lt: bool) -> float:
    """PFTK: P(timeout | a loss in a round of w), sum_k A(w,k) h(k)."""
    if p <= 0:
        return 0.0
    norm = 1 - (1 - p) ** w
    return sum((1 - p) ** k * p / norm * _h(k, p, lt) for k in range(w))


@dataclass(frozen=True)
class Move:
    prob: float
    w: int
    backlog: float   # target backlog in packets before rounding
    l: int
    time_s: float
    delays: tuple    # delays of the packets delivered
    backlog_parts: tuple
    fresh_wait_share: float = 0.0   # share of the fresh packets that wait 1/f (a recovery round, linux)


class Walker:
    """Transitions of single states, and a random walk over them."""

    def __init__(self, params: DelayParams):
        self.p = params
        self.W = int(params.max_window)
        self.Bm = int(params.backlog_bound_packets)
        self.k = params.mss_bytes / params.packet_bytes
        self.r = params.rate_pps * params.rtt_s
        if params.queue == "bytes":
            self.p_nl = params.loss
            self.p_al = min(params.loss, params.loss * params.packet_bytes / params.mss_bytes)
        else:
            self.p_nl = self.p_al = params.loss
        self._new_share = 0.0
        if params.stack != "paper":
            # an input, as β is: the share of a recovery round's segments beyond high_seq
            from tcpdelay.model.delay.repair import recovery_round_new_share
            from tcpdelay.model.delay.stacks import rules
            self._new_share = recovery_round_new_share(rules(params.stack), loss=params.loss,
                                                       rate_pps=params.rate_pps, rtt_s=params.rtt_s)
        self.transitions = lru_cache(maxsize=None)(self._transitions)

    def _probs_nl(self, w: int):
        p, lt = self.p_nl, self.p.limited_transmit
        ok = (1 - p) ** w
        loss = -math.expm1(w * math.log1p(-p))
        if self.p.loss_model == "random":
            to = _to_random(w, p, lt)
        else:
            to = loss * _q_hat(w, p, lt)
        return ok, max(0.0, loss - to), to

    def _probs_al(self, w: int):
        p, lt = self.p_al, self.p.limited_transmit
        if self.p.loss_model == "random":
            to = _to_random_al(w, p, lt)
        else:
            to = p * (_q_hat(w - 1, p, lt) if w >= 2 else 1.0)
        return p - to, to

    def _loss_free(self, w2, B, cap, prob):
        P, f = self.p, self.p.rate_pps
        n = math.floor(min(B, cap) + EPS)
        delays = [P.one_way_s + B / f] * n
        parts = [B / f] * n
        fresh = 0.0
        if P.count_fresh_packets:
            fresh = max(0.0, min(B + self.r, cap) - min(B, cap))
        return Move(prob, w2, max(0.0, B + self.r - cap), 0, P.rtt_s, tuple(delays), tuple(parts)), fresh

    def _ramp(self, fresh: float) -> tuple:
        """``hol_ramp``: the packets written while a retransmission is outstanding, held at the
        receiver behind it, delays ``L + RTT - q/f`` for q = 0..floor(fresh)-1 (none without it)."""
        P = self.p
        if not P.hol_ramp:
            return ()
        return tuple(P.one_way_s + P.rtt_s - q / P.rate_pps for q in range(math.floor(fresh + EPS)))

    # --- the linux and classic stacks (scalar re-derivation of stack_chain) ---------------------
    def _stack_window_after(self, w: int) -> int:
        beta = 717 / 1024 if self.p.stack == "linux" else 0.5
        return max(2, math.floor(beta * w + 1e-9))

    def _linux_cap(self) -> int:
        """An application-limited Linux window grows while the flight right after a send,
        ``⌊r⌋ + 1``, reaches it: up to ``⌊r⌋ + 2``."""
        return math.floor(self.r + 1e-9) + 2

    def _ca_target(self, w: int) -> float:
        """The window after a loss-free round in congestion avoidance (fractional)."""
        if self.p.stack == "classic":
            return w + 1.0
        beta = 717 / 1024
        alpha = 3 * (1 - beta) / (1 + beta)
        cap = float(self._linux_cap())
        # W_max: the window cut from, or after a cut from below the cap (a cascade) its fast
        # convergence, (w/beta)(1 + beta)/2 (RFC 9438 §4.7, bictcp_recalc_ssthresh)
        w_max = w / beta * (1 + beta) / 2 if w / beta < cap - 1e-9 else min(cap, w / beta)

        def ahead(x: float) -> float:      # W one RTT after the instant W equals x
            y = (x - w_max) / 0.4
            return w_max + 0.4 * (math.copysign(abs(y) ** (1 / 3), y) + self.p.rtt_s) ** 3

        # bictcp_update's integer target: the cubic rounded up below W_max, down above it, for
        # a window anywhere within its whole segment (16 midpoints); at the epoch's start just
        # after a cut
        outs = []
        for i in range(16):
            u = (i + 0.5) / 16
            if w < w_max - 1e-9:
                x = float(w) if w / beta < cap - 1e-9 else min(w - 1 + u, w_max)
                outs.append(max(float(w), math.ceil(ahead(x) - 1e-9)))
            else:
                outs.append(max(float(w), math.floor(ahead(w + u * (1 - 1e-9)) + 1e-9)))
        return max(sum(outs) / len(outs), w + alpha)

    def _stack_next(self, w: int) -> list:
        """[(next window, share)] after a loss-free network-limited round."""
        r = self.r
        if self.p.stack == "classic" and w < max(1, math.ceil(r - EPS)):
            return [(min(2 * w, self.W), 1.0)]           # slow start after a timeout
        target = min(self._ca_target(w), self.W)
        lo = math.floor(target + EPS)
        frac = target - lo
        if frac < 1e-9:
            return [(lo, 1.0)]
        return [(lo, 1 - frac), (min(lo + 1, self.W), frac)]

    def _stack_round(self, w2: int, l2: int, B: int, w_now: int, prob: float, retransmissions: int = 0):
        """A round at window ``w_now``, ``retransmissions`` of its segments old data: backlogged
        packets at ``L + B/f``; the packets written in it leave one segment per ACK, ``RTT/w_now``
        apart, so with ``g`` of them per segment (``g >= 2``) they wait ``(g-1)/f … 0`` in every
        gap (the ACK clock)."""
        P, f = self.p, self.p.rate_pps
        cap = (w_now - retransmissions) * self.k
        n = math.floor(min(B, cap) + EPS)
        fresh = max(0.0, min(B + self.r, cap) - min(B, cap))
        delays = [P.one_way_s + B / f] * n
        parts = [B / f] * n
        per_gap = math.floor(fresh / max(w_now, 1) + EPS) if w_now > 0 else 0
        if per_gap >= 2:
            for _ in range(int(w_now)):
                delays += [P.one_way_s + q / f for q in range(per_gap)]
                parts += [0.0] * per_gap
            fresh -= w_now * per_gap
        return Move(prob, w2, max(0.0, B + self.r - cap), l2, P.rtt_s, tuple(delays), tuple(parts)), fresh

    def _stack_transitions(self, w: int, B: int, l: int):
        P = self.p
        f, r, k = P.rate_pps, self.r, self.k
        rto = P.stack == "classic"
        out = []
        if w == 0:
            out.append(self._stack_round(1, 0, B, 1, 1 - self.p_nl))
            backoff = 2.0 ** min(l, MAX_BACKOFF_STAGE)
            out.append((Move(self.p_nl, 0, B + backoff * P.t0_s * f, min(l + 1, MAX_BACKOFF_STAGE),
                             backoff * P.t0_s, (), ()), 0.0))
        elif l == 1:
            # the recovery round: no growth; a loss among its segments is the next loss event
            share = 0.5 if P.stack == "linux" else 0.0   # PRR: half its writes wait one interval
            p = self.p_nl
            ok = (1 - p) ** (w * self._new_share)   # only segments beyond high_seq start an event
            pto = p if rto else 0.0
            # the retransmission is one of the round's w segments
            rounds = [self._stack_round(w, 0, B, w, ok, retransmissions=1),
                      self._stack_round(min(self._stack_window_after(w), self.W), 1, B, w, (1 - ok) * (1 - pto),
                                        retransmissions=1)]
            if pto > 0:
                mv, fresh = self._stack_round(0, 1, B, w, (1 - ok) * pto, retransmissions=1)
                rounds.append((Move(mv.prob, 0, mv.backlog + max(0.0, P.t0_s - P.rtt_s) * f, 1, mv.time_s,
                                    mv.delays, mv.backlog_parts), fresh))
            for mv, fresh in rounds:
                out.append((Move(mv.prob, mv.w, mv.backlog, mv.l, mv.time_s, mv.delays, mv.backlog_parts, share),
                            fresh))
        elif B == 0 and w >= r - EPS:
            p = self.p_al
            pto = p if rto else 0.0
            if rto:     # ns-3: no window validation, one segment per window of ACKs
                grow = 1.0 / w if w < self.W else 0.0
            elif w < min(self._linux_cap(), self.W):   # Linux: the flight still reaches the window
                grow = min(1.0, (self._ca_target(w) - w) / w)
            else:
                grow = 0.0
            if grow > 0:
                out.append((Move((1 - p) * grow, min(w + 1, self.W), 0.0, 0, 1 / f, (P.one_way_s,), (0.0,)), 0.0))
            out.append((Move((1 - p) * (1 - grow), w, 0.0, 0, 1 / f, (P.one_way_s,), (0.0,)), 0.0))
            out.append((Move(p * (1 - pto), min(self._stack_window_after(w), self.W), 0.0, 1, 1 / f,
                             (P.one_way_s,), (0.0,)), 0.0))
            if pto > 0:
                out.append((Move(p * pto, 1, 0.0, 0, 1 / f, (P.one_way_s,), (0.0,)), 0.0))
        else:
            p = self.p_nl
            ok = (1 - p) ** w
            loss = 1 - ok
            pto = p if rto else 0.0
            for w2, share in self._stack_next(w):
                out.append(self._stack_round(w2, 0, B, w, ok * share))
            out.append(self._stack_round(min(self._stack_window_after(w), self.W), 1, B, w, loss * (1 - pto)))
            if pto > 0:
                mv, fresh = self._stack_round(0, 1, B, w, loss * pto)
                out.append((Move(mv.prob, 0, mv.backlog + max(0.0, P.t0_s - P.rtt_s) * f, 1, mv.time_s,
                                 mv.delays, mv.backlog_parts), fresh))
        return [(m, fr_) for m, fr_ in out if m.prob > 0]

    def _transitions(self, w: int, B: int, l: int):
        """[(Move, fresh_packet_weight)] out of state (w, B, l)."""
        P = self.p
        if P.stack != "paper":
            return self._stack_transitions(w, B, l)
        f, rtt, L, r, k = P.rate_pps, P.rtt_s, P.one_way_s, self.r, self.k
        t0f = P.t0_s * f
        out = []
        if w == 0:  # timeout stage l
            out.append(self._loss_free(1, B, k, 1 - self.p_nl))
            backoff = 2.0 ** min(l, MAX_BACKOFF_STAGE)
            out.append((Move(self.p_nl, 0, B + backoff * t0f, min(l + 1, MAX_BACKOFF_STAGE),
                             backoff * P.t0_s, (), ()), 0.0))
        elif l == 1:  # fast recovery
            out.append(self._loss_free(w, B, w * k, 1.0))
        elif B == 0 and w >= r - EPS:  # application-limited
            fr, to = self._probs_al(w)
            out.append((Move(1 - self.p_al, w, 0.0, 0, 1 / f, (L,), (0.0,)), 0.0))
            wfr = max(1, min(self.W, math.floor((r + 3) / 2 + EPS)))
            bfr = 3.0 if P.al_fr_backlog == "table" else 0.0
            ramp = self._ramp(r)
            out.append((Move(fr, wfr, bfr, 1, rtt + 3 / f,
                             tuple(L + rtt + i / f for i in (1, 2, 3)) + ramp,
                             (0.0, 0.0, 0.0) + (0.0,) * len(ramp)), 0.0))
            out.append((Move(to, 0, t0f, 1, P.t0_s, (), ()), 0.0))
        else:  # network-limited, loss-free so far
            ok, fr, to = self._probs_nl(w)
            w_next = w + 1 if w > r / 2 else 2 * w
            if P.growth_requires_backlog and not (B + r - w * k > EPS):
                w_next = w
            out.append(self._loss_free(min(w_next, self.W), B, w * k, ok))
            cap3 = (w + 3) * k
            n = math.floor(min(B, cap3) + EPS)
            ramp = self._ramp(max(0.0, min(B + r, cap3) - min(B, cap3)))
            out.append((Move(fr, max(1, min(self.W, (w + 3) // 2)), max(0.0, B + r - cap3), 1, rtt,
                             tuple(L + rtt + B / f + (3 + i) / f for i in range(1, n + 1)) + ramp,
                             (B / f,) * n + (0.0,) * len(ramp)), 0.0))
            out.append((Move(to, 0, B + t0f, 1, P.t0_s, (), ()), 0.0))
        return [(m, fr_) for m, fr_ in out if m.prob > 0]

    def round_backlog(self, b: float, rng: random.Random) -> int:
        mode = self.p.backlog_rounding
        if mode == "nearest":
            v = math.floor(b + 0.5)
        else:
            v = math.floor(b + EPS)
            if mode == "split" and b - v > 1e-9 and rng.random() < b - v:
                v += 1
        return min(v, self.Bm)

    def start(self) -> tuple[int, int, int]:
        return (max(1, math.ceil(self.r - EPS)), 0, 0)


@dataclass
class WalkResult:
    delays: dict           # delay (rounded to 1 ns) -> packet weight
    batch_means: list      # packet-weighted mean delay per batch
    packets: float
    steps: int
    window_time_s: dict = None   # window (segments; 0 a timeout state) -> time the walk spent at it

    @property
    def mean_s(self) -> float:
        return sum(d * c for d, c in self.delays.items()) / self.packets

    def cdf(self, x: float) -> float:
        return sum(c for d, c in self.delays.items() if d <= x + 1e-12) / self.packets

    def mean_ci_halfwidth(self, z: float = 3.0) -> float:
        """``z`` standard errors of the mean from batch means (the walk is correlated)."""
        m = len(self.batch_means)
        mu = sum(self.batch_means) / m
        var = sum((b - mu) ** 2 for b in self.batch_means) / (m - 1)
        return z * math.sqrt(var / m)


def walk(params: DelayParams, steps: int = 200_000, batches: int = 40, seed: int = 1,
         burn_in: int = 2_000) -> WalkResult:
    """Walk the chain for ``steps`` transitions after ``burn_in``; batch means over equal
    numbers of steps give the confidence interval of the mean."""
    rng = random.Random(seed)
    wk = Walker(params)
    state = wk.start()
    delays: dict = {}
    per_batch = steps // batches
    batch_means = []
    total_packets = 0.0
    acc_d = acc_n = 0.0
    window_time: dict = {}
    for step in range(burn_in + per_batch * batches):
        moves = wk.transitions(*state)
        u = rng.random()
        acc = 0.0
        chosen = moves[-1]
        for mv in moves:
            acc += mv[0].prob
            if u < acc:
                chosen = mv
                break
        mv, fresh = chosen
        if step >= burn_in:
            window_time[state[0]] = window_time.get(state[0], 0.0) + mv.time_s
            for d in mv.delays:
                key = round(d, 9)
                delays[key] = delays.get(key, 0.0) + 1.0
                acc_d += d
            acc_n += len(mv.delays)
            if fresh > 0:
                share = mv.fresh_wait_share
                for d, wt in ((params.one_way_s, fresh * (1 - share)),
                              (params.one_way_s + 1 / params.rate_pps, fresh * share)):
                    if wt > 0:
                        key = round(d, 9)
                        delays[key] = delays.get(key, 0.0) + wt
                        acc_d += wt * d
                        acc_n += wt
            if (step - burn_in + 1) % per_batch == 0:
                batch_means.append(acc_d / acc_n if acc_n else 0.0)
                total_packets += acc_n
                acc_d = acc_n = 0.0
        state = (mv.w, wk.round_backlog(mv.backlog, rng), mv.l)
    return WalkResult(delays, batch_means, total_packets, per_batch * batches, window_time)
