"""The packet-weighted delay distribution (eq 3) and its statistics.

Eq (3) of Brosh et al. weighs every transition by the packets it delivers:
``P(D = d) = sum_s pi_s sum_s' q_ss' #{i : d_ss'^(i) = d} / sum_s pi_s sum_s' q_ss' n_ss'``.
All delays lie on two lattices, ``L + j/f`` (loss-free) and ``L + RTT + j/f`` (behind a fast
retransmit; ``j`` down to ``−(r−1)`` with ``hol_ramp``), with integer ``j``, so the
distribution is accumulated exactly on those lattices (runs of consecutive offsets by
difference arrays) and then merged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

PERCENTILES = (50.0, 95.0, 99.0, 99.9)
MAX_TAIL_PROBABILITY = 1e-5
"""``max_s`` is the largest delay still exceeded with probability >= this (a packet-weighted
'maximum' a measurement of ~10^5 packets can see; the chain's support itself is unbounded up
to the truncation)."""


def _key(q: float) -> str:
    return "p" + (f"{q:g}".replace(".", "")) + "_s"


@dataclass
class DelayPrediction:
    """Predicted per-packet delay distribution of a CBR source over TCP.

    ``support_s`` (ascending) and ``pmf`` define the distribution of the one-way delay from
    the application's send to its receive (network one-way delay ``L`` included). When
    ``unstable`` is true (TCP's PFTK throughput does not exceed the source's rate) the delay
    grows without bound and the distribution is empty: statistics are ``None`` in
    :meth:`to_dict`, quantiles are ``inf`` and :meth:`late_fraction` is 1.
    """

    support_s: np.ndarray
    pmf: np.ndarray
    unstable: bool
    one_way_s: float
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        self.support_s = np.asarray(self.support_s, dtype=float)
        self.pmf = np.asarray(self.pmf, dtype=float)
        self._cum = np.cumsum(self.pmf) if self.pmf.size else np.zeros(0)

    # --- the distribution -------------------------------------------------------------
    def cdf(self, x):
        """P(D <= x), vectorized."""
        x = np.asarray(x, dtype=float)
        if self.unstable or not self.pmf.size:
            return np.zeros_like(x)[()]
        i = np.searchsorted(self.support_s, x + 1e-12, side="right")
        out = np.where(i > 0, self._cum[np.maximum(i - 1, 0)], 0.0)
        return np.minimum(out, 1.0)[()]

    def quantile(self, q):
        """Smallest support point ``x`` with P(D <= x) >= q (the paper's alpha-percentile)."""
        q = np.asarray(q, dtype=float)
        if self.unstable or not self.pmf.size:
            return np.full_like(q, np.inf)[()]
        i = np.searchsorted(self._cum, q - 1e-12, side="left")
        return self.support_s[np.minimum(i, self.support_s.size - 1)][()]

    def late_fraction(self, playout_delay_s):
        """Fraction of packets later than a fixed playout delay, P(D > x) (Figure 23)."""
        if self.unstable:
            return np.ones_like(np.asarray(playout_delay_s, dtype=float))[()]
        return (1.0 - self.cdf(playout_delay_s))[()]

    @property
    def mean_s(self) -> float:
        if self.unstable:
            return math.inf
        return float(np.dot(self.support_s, self.pmf))

    @property
    def std_s(self) -> float:
        """Standard deviation, the paper's jitter."""
        if self.unstable:
            return math.inf
        m = self.mean_s
        return float(math.sqrt(max(0.0, np.dot((self.support_s - m) ** 2, self.pmf))))

    @property
    def max_s(self) -> float:
        """Largest delay exceeded with probability >= MAX_TAIL_PROBABILITY."""
        if self.unstable:
            return math.inf
        tail = 1.0 - np.concatenate([[0.0], self._cum[:-1]])  # P(D >= support[i])
        ok = np.flatnonzero(tail >= MAX_TAIL_PROBABILITY)
        return float(self.support_s[ok[-1]]) if ok.size else float(self.support_s[-1])

    def percentile_s(self, pct: float) -> float:
        return float(self.quantile(pct / 100.0))

    def statistics(self) -> dict:
        """mean_s, std_s, p50_s, p95_s, p99_s, p999_s, max_s (None when unstable)."""
        if self.unstable:
            out = {"mean_s": None, "std_s": None}
            out.update({_key(q): None for q in PERCENTILES})
            out["max_s"] = None
            return out
        out = {"mean_s": self.mean_s, "std_s": self.std_s}
        out.update({_key(q): self.percentile_s(q) for q in PERCENTILES})
        out["max_s"] = self.max_s
        return out

    def to_dict(self, include_distribution: bool = True) -> dict:
        """The JSON document of ``tcpdelay delay`` (keys documented in docs/cli.md)."""
        out = self.statistics()
        out["unstable"] = bool(self.unstable)
        for key, value in self.info.items():
            if key not in out:
                out[key] = value
        if include_distribution:
            out["distribution"] = (
                None if self.unstable else
                {"delay_s": self.support_s.tolist(), "probability": self.pmf.tolist()})
        return out


def packet_distribution(chain, pi: np.ndarray):
    """(support_s, pmf, backlog_share) of eq (3) for a solved chain."""
    p = chain.params
    e = chain.edges
    ew = pi[e.src] * e.prob
    use = (ew > 0) & (e.n > 0)
    ew, n, c, j0, js, jb = ew[use], e.n[use], e.c[use], e.j0[use], e.jstep[use], e.jb[use]
    total = float(np.dot(ew, n))
    if total <= 0:
        raise ValueError("no packets are delivered in steady state")
    j0i = np.rint(j0).astype(np.int64)
    ni = np.rint(n).astype(np.int64)
    # hol_ramp puts packets below L + RTT (negative offsets on that lattice): shift the grids
    off = int(max(0, -j0i.min(initial=0)))
    j0i = j0i + off
    top = int(max(j0i.max(initial=0), (j0i + ni * (js == 1)).max(initial=0))) + 2
    grids = []
    for cc in (0, 1):
        g = np.zeros(top + 1)
        flat = (c == cc) & (js == 0)
        g += np.bincount(j0i[flat], weights=ew[flat] * n[flat], minlength=top + 1)[: top + 1]
        run = (c == cc) & (js == 1)
        diff = np.bincount(j0i[run], weights=ew[run], minlength=top + 1)[: top + 1]
        diff -= np.bincount(j0i[run] + ni[run], weights=ew[run], minlength=top + 1)[: top + 1]
        g += np.cumsum(diff)
        grids.append(g)
    j = np.arange(top + 1) - off
    vals = np.concatenate([p.one_way_s + j / p.rate_pps, p.one_way_s + p.rtt_s + j / p.rate_pps])
    mass = np.concatenate(grids)
    keep = mass > 0
    vals, mass = vals[keep], mass[keep]
    keys = np.round(vals, 9)
    support, inv = np.unique(keys, return_inverse=True)
    pmf = np.zeros(support.size)
    np.add.at(pmf, inv, mass)
    pmf /= pmf.sum()
    backlog_s = float(np.dot(ew, n * jb)) / total / p.rate_pps
    tcp_level = float(np.dot(support, pmf)) - p.one_way_s
    share = backlog_s / tcp_level if tcp_level > 1e-12 else 0.0
    return support, pmf, min(max(share, 0.0), 1.0)


def _time_weights(chain, pi: np.ndarray) -> np.ndarray:
    """Each state's share of time (unnormalized): its stationary probability times its mean
    holding time (``1/f`` application-limited, ``RTT`` a round, eq 5)."""
    e = chain.edges
    real = chain.packet_edge
    tau = np.bincount(e.src[real], weights=(e.prob * e.time_s)[real], minlength=chain.space.n)
    return pi * tau


def window_time_shares(chain, pi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(windows in segments, their shares of time) of a solved chain, the windows with a
    positive share; 0 is the timeout states."""
    tw = _time_weights(chain, pi)
    w, _, _ = chain.space.decode(np.arange(chain.space.n))
    share = np.bincount(w, weights=tw)
    windows = np.flatnonzero(share > 0)
    return windows, share[windows] / share.sum()


def chain_statistics(chain, pi: np.ndarray) -> dict:
    """Time-averaged window and backlog, timeout share of loss events, truncated mass."""
    e = chain.edges
    real = chain.packet_edge
    space = chain.space
    ew = pi[e.src] * e.prob
    w, B, _ = space.decode(np.arange(space.n))
    tw = _time_weights(chain, pi)
    T = tw.sum()
    fr = float(ew[real & (e.is_loss == 1)].sum())
    to = float(ew[real & (e.is_loss == 2)].sum())
    return {
        "mean_window": float(np.dot(tw, w) / T),
        "mean_backlog_packets": float(np.dot(tw, B) / T),
        "mean_backlog_bytes": float(np.dot(tw, B) / T * chain.params.packet_bytes),
        "timeout_probability": to / (fr + to) if fr + to > 0 else 0.0,
        "loss_events_per_s": (fr + to) / T if T > 0 else 0.0,
        "truncated_mass": float(pi[B == space.Bm].sum()),
        "clipped_flow": float(ew[real & chain.clipped].sum()),
    }
