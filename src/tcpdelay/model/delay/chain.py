"""State space and transition matrix of the CBR-over-TCP delay chain (vectorized).

Brosh et al., "The Delay-Friendliness of TCP for Real-Time Traffic": Section 4 (eqs 1-5),
Table 2 (classification), Table 6 (transitions), Appendix A.1 (random / correlated loss,
byte-limited queue), A.2 (limited transmit), A.3 (state space).

State ``(w, B, l)``: window ``w`` in segments, backlog ``B`` in whole packets, ``l`` = 0 (no loss
pending), 1 (fast recovery pending) or, with ``w = 0``, the timeout back-off stage 1..6.
Index layout: non-timeout states ``(l*W + w-1)*(Bm+1) + B`` for l in {0, 1}, w in 1..W, then
timeout states ``2*W*(Bm+1) + (l-1)*(Bm+1) + B``.

Every transition is an *edge* carrying, besides its probability and duration, the packets it
delivers as ``n`` packets with delays ``L + c·RTT + (j0 + jstep·(i-1))/f`` for i = 1..n (eq 1)
and the backlog part ``jb/f`` of each delay (Figure 17b). Fractional target backlogs are
rounded to whole packets after the edge is formed (``backlog_rounding``), so an edge's packets
are counted once even when it splits between two target states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order
from scipy.special import comb, gammaln

from tcpdelay.model.delay.chain_states import (EdgeParts, Edges, StateSpace, _column,  # noqa: F401
                                               _EDGE_DTYPES, segment_loss)
from tcpdelay.model.delay.params import MAX_BACKOFF_STAGE, DelayParams

_EPS = 1e-9


def binom_table(wmax: int, p: float) -> np.ndarray:
    """``T[n, i] = C(n, i) p^i (1-p)^(n-i)`` for 0 <= i <= n <= wmax, in log space (robust for
    any ``p`` in [0, 1), denormals included; scipy's binom overflows there)."""
    n = np.arange(wmax + 1)[:, None].astype(float)
    i = np.arange(wmax + 1)[None, :].astype(float)
    valid = i <= n
    if p <= 0:
        return np.where(valid & (i == 0), 1.0, 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        logc = gammaln(n + 1) - gammaln(i + 1) - gammaln(np.maximum(n - i, 0) + 1)
        logt = logc + i * np.log(p) + (n - i) * np.log1p(-p)
    return np.where(valid, np.exp(np.where(valid, logt, -np.inf)), 0.0)


def _rows(T: np.ndarray, n: np.ndarray, i: np.ndarray) -> np.ndarray:
    ok = (i >= 0) & (i <= n) & (n >= 0)
    return np.where(ok, T[np.clip(n, 0, T.shape[0] - 1), np.clip(i, 0, T.shape[1] - 1)], 0.0)


def random_loss_probs(w: np.ndarray, p: float, limited_transmit: bool):
    """Fast-retransmit probability of a round of ``w`` segments with independent losses.

    SACK-style recovery (Sikdar et al., the paper's [37]): a round with ``1 <= i <= w-3``
    losses delivers at least 3 segments, hence 3 duplicate ACKs. Limited transmit (RFC 3042,
    derived from the mechanism, Appendix A.2): with ``i = w-1`` losses the one duplicate ACK
    releases a new segment whose ACK releases another; both must arrive, ``(1-p)^2``. With
    ``i = w-2`` the two duplicate ACKs release two new segments of which one must arrive,
    ``1-p^2``. Returns (no loss, fast retransmit, timeout); the sums are of positive terms
    (no cancellation at small ``p``).
    """
    w = np.asarray(w, dtype=np.int64)
    T = binom_table(int(w.max(initial=1)), p)
    ok = T[w, 0]
    loss = -np.expm1(w * np.log1p(-p)) if p > 0 else np.zeros(w.shape)
    to = _timeout_tail(T, w, p, limited_transmit)
    fr = np.clip(loss - to, 0.0, 1.0)
    return ok, fr, to


def _timeout_tail(T: np.ndarray, n: np.ndarray, p: float, limited_transmit: bool) -> np.ndarray:
    """P(timeout) for a round of ``n`` segments: fewer than 3 arrive (and at least one is
    lost); with limited transmit weighted by the new segments' fates. Summed directly, so tiny
    timeout probabilities keep their relative accuracy."""
    to = np.where(n >= 1, T[n, n], 0.0)
    f1 = (1 - (1 - p) ** 2) if limited_transmit else 1.0   # one segment arrived
    f2 = p * p if limited_transmit else 1.0                 # two segments arrived
    to = to + np.where(n > 1, _rows(T, n, n - 1) * f1, 0.0)
    to = to + np.where(n > 2, _rows(T, n, n - 2) * f2, 0.0)
    return to


def random_loss_probs_al(w: np.ndarray, p: float, limited_transmit: bool):
    """As :func:`random_loss_probs` for an application-limited state, where the first segment
    of the window is the lost one: ``P_w(i)`` becomes ``p·P_{w-1}(i-1)`` (Appendix A.1).
    Returns (fast retransmit, timeout); no loss has probability ``1 - p``."""
    w = np.asarray(w, dtype=np.int64)
    if p <= 0:
        z = np.zeros(w.shape)
        return z, z.copy()
    T = binom_table(int(w.max(initial=1)), p)
    # the first segment is lost; among the other w-1, the first-lost-included count i is j+1
    to = p * np.where(w == 1, 1.0, T[np.maximum(w - 1, 0), np.maximum(w - 1, 0)])
    f1 = (1 - (1 - p) ** 2) if limited_transmit else 1.0
    f2 = p * p if limited_transmit else 1.0
    to = to + np.where(w > 1, p * _rows(T, w - 1, w - 2) * f1, 0.0)
    to = to + np.where(w > 2, p * _rows(T, w - 1, w - 3) * f2, 0.0)
    to = np.clip(to, 0.0, p)
    return p - to, to


def _pftk_h(k: np.ndarray, p: float, limited_transmit: bool) -> np.ndarray:
    """Probability that a loss is detected by timeout when ``k`` segments of the lossy round
    got through (PFTK Section 2.2): k <= 2 give too few duplicate ACKs; for k >= 3 PFTK's
    next-round term sum_{m<=2} C(k,m)(1-p)^m p^(k-m). With limited transmit, k = 1 needs its two
    new segments to arrive (timeout ``1-(1-p)^2``) and k = 2 one of them (timeout ``p``)."""
    k = np.asarray(k, dtype=float)
    h = np.zeros_like(k)
    for m in range(3):
        h += np.where(k >= 3, comb(k, m) * (1 - p) ** m * p ** np.maximum(k - m, 0), 0.0)
    if limited_transmit:
        h = np.where(k == 0, 1.0, h)
        h = np.where(k == 1, 1.0 - (1 - p) ** 2, h)
        h = np.where(k == 2, p, h)
    else:
        h = np.where(k <= 2, 1.0, h)
    return h


def correlated_timeout_given_loss(w: np.ndarray, p: float, limited_transmit: bool) -> np.ndarray:
    """PFTK's Q̂(w) = sum_k A(w,k) h(k), with A(w,k) = (1-p)^k p / (1-(1-p)^w), k = 0..w-1,
    the probability that exactly k segments of a lossy round get through before the first loss
    (Padhye et al., SIGCOMM 1998; Cardwell et al. eq 17 is its closed form without limited
    transmit)."""
    w = np.asarray(w, dtype=np.int64)
    if p <= 0:
        return np.where(w <= 3, 1.0, 0.0) if not limited_transmit else np.zeros(w.shape)
    wmax = int(w.max()) if w.size else 1
    k = np.arange(wmax)
    hk = _pftk_h(k, p, limited_transmit)
    ak = (1 - p) ** k * p  # unnormalized A(w, k)
    cum = np.concatenate([[0.0], np.cumsum(ak * hk)])
    return cum[w] / -np.expm1(w * np.log1p(-p))


def correlated_loss_probs(w, p, limited_transmit):
    w = np.asarray(w, dtype=np.int64)
    ok = (1.0 - p) ** w.astype(float)
    loss = -np.expm1(w * np.log1p(-p)) if p > 0 else np.zeros(w.shape)
    to = loss * correlated_timeout_given_loss(w, p, limited_transmit)
    return ok, loss - to, to


def correlated_loss_probs_al(w, p, limited_transmit):
    """Application-limited: the first segment is lost (prob ``p``) and ``A(w,k)`` becomes
    ``p·A(w-1, k-1)``; the j = k-1 segments of the remaining w-1 that get through give the
    duplicate ACKs. Returns (fast retransmit, timeout)."""
    w = np.asarray(w, dtype=np.int64)
    if p <= 0:
        z = np.zeros(w.shape)
        return z, z.copy()
    q = np.ones(w.shape)
    big = w >= 2
    q[big] = correlated_timeout_given_loss(w[big] - 1, p, limited_transmit)
    to = p * q
    return p - to, to


def build_edges(params: DelayParams, space: StateSpace) -> Edges:
    """All transitions of Table 6, vectorized over states."""
    return _edge_builder(params, space)(np.arange(space.n))[0]


def _edge_builder(params: DelayParams, space: StateSpace):
    """``edges_from(src)``: the transitions of Table 6 out of the states ``src`` (sorted state
    indices), vectorized over them, and the part (event kind, in a fixed order) of each edge.
    Out of every state (``src = arange(n)``) the edges are those of :func:`build_edges`, in its
    order: by part, then by source index. The loss probabilities of every window are computed
    once, for all calls. The ``linux`` and ``classic`` stacks have their own transitions
    (:mod:`tcpdelay.model.delay.stack_chain`)."""
    if params.stack != "paper":
        from tcpdelay.model.delay.stack_chain import edge_builder
        return edge_builder(params, space)
    f, rtt, L = params.rate_pps, params.rtt_s, params.one_way_s
    r = params.r
    k = params.packets_per_segment
    t0f = params.t0_s * f
    W, Bm = space.W, space.Bm
    lt = params.limited_transmit
    p_nl = segment_loss(params, params.mss_bytes)
    p_al = segment_loss(params, params.packet_bytes)
    if params.loss_model == "random":
        nl_probs = random_loss_probs
        al_probs = random_loss_probs_al
    else:
        nl_probs = correlated_loss_probs
        al_probs = correlated_loss_probs_al

    ws = np.arange(1, W + 1)
    ok_w, fr_w, to_w = nl_probs(ws, p_nl, lt)
    alfr_w, alto_w = al_probs(ws, p_al, lt)
    w_fr_al = max(1, min(W, int(np.floor((r + 3) / 2 + _EPS))))
    b_fr_al = 3.0 if params.al_fr_backlog == "table" else 0.0

    def edges_from(src_all: np.ndarray) -> tuple[Edges, np.ndarray]:
        parts = EdgeParts()
        add = parts.add

        w_all, B_all, l_all = space.decode(src_all)

        # Non-timeout states with l = 0, in (w, B) order.
        m0 = (w_all > 0) & (l_all == 0)
        wg, Bg, src0 = w_all[m0], B_all[m0], src_all[m0]
        al = (Bg == 0) & (wg >= r - _EPS)

        # (a) application-limited: one packet per step of 1/f.
        wa, sa = wg[al], src0[al]
        add(sa, wa, 0.0, 0, 1.0 - p_al, 1.0 / f, n=1.0)
        add(sa, w_fr_al, b_fr_al, 1, alfr_w[wa - 1], rtt + 3.0 / f, n=3.0, c=1, j0=1.0, jstep=1, is_loss=1)
        if params.hol_ramp:
            _add_hol_ramp(add, sa, w_fr_al, b_fr_al, alfr_w[wa - 1], np.full(wa.shape, float(r)))
        add(sa, 0, t0f, 1, alto_w[wa - 1], params.t0_s, is_loss=2)

        # (b) network-limited, loss-free l = 0 (CA or SS): one round of RTT.
        nl = ~al
        wn, Bn, sn = wg[nl], Bg[nl].astype(float), src0[nl]
        cap = wn * k
        b_ok = np.maximum(0.0, Bn + r - cap)
        grow = np.where(wn > r / 2, wn + 1, 2 * wn)
        if params.growth_requires_backlog:
            grow = np.where(b_ok > _EPS, grow, wn)
        grow = np.minimum(grow, W)
        n_ok = np.floor(np.minimum(Bn, cap) + _EPS)
        _add_loss_free(add, params, sn, grow, Bn, b_ok, cap, n_ok, ok_w[wn - 1], rtt, r)
        # fast retransmit: window inflation by 3 duplicate ACKs, eq (1) delays.
        cap3 = (wn + 3) * k
        n_fr = np.floor(np.minimum(Bn, cap3) + _EPS)
        w_fr = np.minimum(W, np.maximum(1, (wn + 3) // 2))
        add(sn, w_fr, np.maximum(0.0, Bn + r - cap3), 1, fr_w[wn - 1], rtt,
            n=n_fr, c=1, j0=Bn + 4.0, jstep=1, jb=Bn, is_loss=1)
        if params.hol_ramp:
            _add_hol_ramp(add, sn, w_fr, np.maximum(0.0, Bn + r - cap3), fr_w[wn - 1],
                          np.maximum(0.0, np.minimum(Bn + r, cap3) - np.minimum(Bn, cap3)))
        add(sn, 0, Bn + t0f, 1, to_w[wn - 1], params.t0_s, is_loss=2)

        # (c) fast recovery l = 1: one round, then loss-free with the same window.
        m1 = (w_all > 0) & (l_all == 1)
        w1, src1 = w_all[m1], src_all[m1]
        Bf1 = B_all[m1].astype(float)
        cap = w1 * k
        _add_loss_free(add, params, src1, w1, Bf1, np.maximum(0.0, Bf1 + r - cap), cap,
                       np.floor(np.minimum(Bf1, cap) + _EPS), 1.0, rtt, r)

        # (d) timeout stages l = 1..6 with w = 0.
        for l in range(1, MAX_BACKOFF_STAGE + 1):
            mt = (w_all == 0) & (l_all == l)
            st = src_all[mt]
            Btf = B_all[mt].astype(float)
            _add_loss_free(add, params, st, 1, Btf, np.maximum(0.0, Btf + r - k), k,
                           np.floor(np.minimum(Btf, k) + _EPS), 1.0 - p_nl, rtt, r)
            backoff = 2.0 ** min(l, MAX_BACKOFF_STAGE)
            add(st, 0, Btf + backoff * t0f, min(l + 1, MAX_BACKOFF_STAGE), p_nl, backoff * params.t0_s, is_loss=0)

        return parts.edges()

    return edges_from


def _add_loss_free(add, params, src, w2, B, b_next, cap, n_backlog, prob, rtt, r):
    """A loss-free round: the backlogged packets that fit in the window leave with delay
    ``L + B/f`` (eq 1, third case). With ``count_fresh_packets`` the packets that arrive during
    the round and fit in the rest of the window are counted too, with delay ``L``."""
    add(src, w2, b_next, 0, prob, rtt, n=n_backlog, c=0, j0=B, jstep=0, jb=B)
    if params.count_fresh_packets:
        fresh = np.maximum(0.0, np.minimum(B + r, cap) - np.minimum(B, cap))
        # zero-probability twin edge: carries packets, no probability mass of its own
        add(src, w2, b_next, 0, prob, 0.0, n=fresh, c=0, j0=0.0, jstep=0, jb=0.0)


def _add_hol_ramp(add, src, w2, b_next, prob, fresh):
    """``hol_ramp``: the head-of-line ramp behind a fast retransmit, as a packet-only twin of
    the fast-retransmit edge (no probability mass of its own, like the fresh-packet twins).

    The lost packet leaves at time 0; the duplicate ACKs of the next three return at
    ``RTT + 3/f`` and the retransmission reaches the receiver at ``L + RTT + 3/f``. Table 6
    counts the lost packet and the two behind it, delays ``L + RTT + i/f``, i = 3, 2, 1. The
    packets the source writes from ``3/f`` on, until the retransmission goes out, arrive before
    it and are held at the receiver (in-order delivery): the one written ``(3 + q)/f`` after the
    loss waits until ``L + RTT + 3/f``, delay ``L + RTT − q/f``, q = 0..m−1, with ``m = ⌊r⌋``
    from an application-limited state. From a network-limited state the packets written in the
    round that fit in the inflated window (``min(B + r, (w+3)·MSS/a) − min(B, (w+3)·MSS/a)``,
    the fresh packets of ``count_fresh_packets``) take the same ramp; those beyond it stay in
    the backlog and are counted by the next round as Table 6 does. None of these packets is
    counted elsewhere in the chain: Table 6 gives a fast-retransmit edge no fresh packets.
    Delays lie on the ``L + RTT + j/f`` lattice with ``j = −(m−1)..0``."""
    m = np.floor(np.asarray(fresh, float) + _EPS)
    add(src, w2, b_next, 1, prob, 0.0, n=m, c=1, j0=1.0 - m, jstep=1, jb=0.0, is_loss=0)


@dataclass
class Chain:
    """The transition matrix and its edges."""

    params: DelayParams
    space: StateSpace
    edges: Edges
    Q: sp.csr_matrix          # row-stochastic, all states of ``space``
    clipped: np.ndarray       # per edge: its target backlog exceeded the bound
    packet_edge: np.ndarray   # per edge: False for the packet-only twins (count_fresh_packets, hol_ramp)
    residual: float = float("nan")  # ||pi Q - pi||_1 of the last solve


def start_index(params: DelayParams, space: StateSpace) -> int:
    """The application-limited state with the smallest window that admits ``r`` packets."""
    w0 = max(1, math.ceil(params.r - 1e-9))
    return int(space.index(w0, 0, 0))


def _rounded_targets(e: Edges, params: DelayParams, space: StateSpace):
    """``backlog_rounding`` of the edges' fractional target backlogs: (lower target, upper
    target, share to the upper one, clipped at the bound)."""
    Bf = e.Bf
    if params.backlog_rounding == "split":
        lo = np.floor(Bf + _EPS)
        frac = np.clip(Bf - lo, 0.0, 1.0)
        frac = np.where(frac < 1e-9, 0.0, frac)
    elif params.backlog_rounding == "nearest":
        lo = np.floor(Bf + 0.5)
        frac = np.zeros_like(Bf)
    else:
        lo = np.floor(Bf + _EPS)
        frac = np.zeros_like(Bf)
    hi = lo + 1
    clipped = hi * (frac > 0) > space.Bm
    clipped |= lo > space.Bm
    lo_i = np.minimum(lo, space.Bm).astype(np.int64)
    hi_i = np.minimum(hi, space.Bm).astype(np.int64)
    dst_lo = space.index(e.w2, lo_i, e.l2)
    dst_hi = dst_lo + (hi_i - lo_i)   # the index is the backlog plus a term of (w, l)
    return dst_lo, dst_hi, frac, clipped


WINDOW_BATCH_MAX_STATES = 30_000
"""State spaces up to this size are built in window batches by :func:`reachable_edges`, larger
ones breadth-first."""
_FIRST_WINDOW_CAP = 16
"""The windows a window-batched build builds first (with the start state's, if larger)."""


def _successors(e: Edges, params: DelayParams, space: StateSpace) -> tuple[np.ndarray, np.ndarray]:
    """(source, target) of every transition of ``e`` with probability mass after
    ``backlog_rounding`` (the packet-only twins carry none): the arcs of the chain's graph."""
    dst_lo, dst_hi, frac, _ = _rounded_targets(e, params, space)
    real = e.time_s != 0.0
    to_lo = real & (e.prob * (1 - frac) > 0)
    to_hi = real & (e.prob * frac > 0)
    return np.concatenate([e.src[to_lo], e.src[to_hi]]), np.concatenate([dst_lo[to_lo], dst_hi[to_hi]])


def reachable_edges(params: DelayParams, space: StateSpace, start: int) -> Edges:
    """The edges of :func:`build_edges` out of the states reachable from ``start``, in its order
    (by part, then by source): the same arrays as ``build_edges`` with the edges of unreachable
    sources left out. Built in window batches (:func:`_window_batched_edges`) in a space of at
    most :data:`WINDOW_BATCH_MAX_STATES` states, else breadth-first
    (:func:`_breadth_first_edges`); the two give the same arrays bit for bit.

    Why: the truncated space holds ``2·W·(b_m+1)`` window/backlog pairs but the chain visits few
    of them (video at RTT 300 ms split in 4: 15 533 of 773 766 states); building every one of
    them took more time than solving the chain. The chain visits most backlogs of the windows it
    reaches, but few windows: in a small space a breadth-first build (18 to 30 steps at the
    validation grid's cells, 990 to 24 846 states) spent its time in the builder calls' fixed
    cost, and the window batches, one to four calls, take half the time (the chains of the
    paper's validation grid, 168 predictions: 1.75 s -> 0.8 s of CPU,
    ``benchmarks/delay_solve.py --validation-grid``). In a large space the batches build many
    states the chain never visits (split in 4: 14 ms breadth-first, 84 ms in batches)."""
    if space.n <= WINDOW_BATCH_MAX_STATES:
        return _window_batched_edges(params, space, start)
    return _breadth_first_edges(params, space, start)


def _in_build_order(found: list[tuple[Edges, np.ndarray]], sources: np.ndarray) -> Edges:
    """The edges of the builder calls ``found`` out of ``sources`` (a mask over the states), by
    part, then by source (a stable sort: the edges of one source come from one call, in its
    order)."""
    part = np.concatenate([pt for _, pt in found])
    cat = {key: np.concatenate([getattr(e, key) for e, _ in found]) for key in _EDGE_DTYPES}
    keep = np.flatnonzero(sources[cat["src"]])
    order = keep[np.lexsort((cat["src"][keep], part[keep]))]
    return Edges(**{key: v[order] for key, v in cat.items()})


def _window_batched_edges(params: DelayParams, space: StateSpace, start: int) -> Edges:
    """:func:`reachable_edges` in window batches: the edges of every state with a window up to
    a cap (every backlog and stage; the timeout states, window 0, in the first batch), the cap
    doubled while a state reachable from ``start`` through the edges built so far lies above
    it; then those of the reachable sources. Every column of an edge is computed from its source
    state alone (elementwise), so a state's edges are the same bit for bit whichever call builds
    them."""
    edges_from = _edge_builder(params, space)
    window = space.decode(np.arange(space.n))[0]
    built = np.zeros(space.n, dtype=bool)
    found: list[tuple[Edges, np.ndarray]] = []
    arcs: list[tuple[np.ndarray, np.ndarray]] = []
    cap = max(_FIRST_WINDOW_CAP, int(window[start]))
    while True:
        batch = np.flatnonzero(~built & (window <= cap))
        e, part = edges_from(batch)
        built[batch] = True
        found.append((e, part))
        arcs.append(_successors(e, params, space))
        rows = np.concatenate([a for a, _ in arcs])
        cols = np.concatenate([b for _, b in arcs])
        graph = sp.csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols)), shape=(space.n, space.n))
        reached = np.zeros(space.n, dtype=bool)
        reached[breadth_first_order(graph, start, directed=True, return_predecessors=False)] = True
        beyond = reached & ~built
        if not beyond.any():
            return _in_build_order(found, reached)
        cap = max(2 * cap, int(window[beyond].max()))


def _breadth_first_edges(params: DelayParams, space: StateSpace, start: int) -> Edges:
    """:func:`reachable_edges` breadth-first from ``start``: one builder call per step, out of
    the states first reached in the step before."""
    edges_from = _edge_builder(params, space)
    seen = np.zeros(space.n, dtype=bool)
    seen[start] = True
    frontier = np.array([start], dtype=np.int64)
    found: list[tuple[Edges, np.ndarray]] = []
    while frontier.size:
        e, part = edges_from(frontier)
        found.append((e, part))
        targets = np.unique(_successors(e, params, space)[1])
        frontier = targets[~seen[targets]]
        seen[frontier] = True
    return _in_build_order(found, seen)


def build_chain(params: DelayParams, *, reachable_only: bool = False) -> Chain:
    """Build Q (Table 6) with ``backlog_rounding`` applied to fractional target backlogs.

    ``reachable_only``: only the rows of the states reachable from the application-limited start
    state (:func:`start_index`; the others are empty rows), by :func:`reachable_edges`. The
    recurrent class and its rows of Q are those of the full chain, bit for bit, so its
    stationary vector is the same."""
    space = StateSpace(W=int(params.max_window), Bm=int(params.backlog_bound_packets))
    e = reachable_edges(params, space, start_index(params, space)) if reachable_only else build_edges(params, space)
    twin = e.time_s == 0.0  # packet-only twins (fresh packets of loss-free edges, HOL ramps)
    dst_lo, dst_hi, frac, clipped = _rounded_targets(e, params, space)
    real = ~twin
    rows = np.concatenate([e.src[real], e.src[real]])
    cols = np.concatenate([dst_lo[real], dst_hi[real]])
    vals = np.concatenate([(e.prob * (1 - frac))[real], (e.prob * frac)[real]])
    nz = vals > 0
    Q = sp.csr_matrix((vals[nz], (rows[nz], cols[nz])), shape=(space.n, space.n))
    Q.sum_duplicates()
    return Chain(params=params, space=space, edges=e, Q=Q, clipped=clipped, packet_edge=real)
