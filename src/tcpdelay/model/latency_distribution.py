"""The distribution of TCP latency, not only its mean (Cardwell et al. Section II-E).

Cardwell, Savage, Anderson, "Modeling TCP Latency", INFOCOM 2000, Section II-E: "to approximate
the distribution of latency for a set of flows, one can consider the range of possible loss
rates and delayed ACK costs, and estimate the likelihood of each scenario, along with the latency
expected with that scenario." This module makes that precise:

1. **Loss scenarios.** Under Bernoulli loss with rate ``p`` per transmission, the number ``K``
   of transmissions lost while ``d`` segments get through is negative binomial:
   ``P[K = k] = C(d+k-1, k) p^k (1-p)^d``. A flow that lost ``k`` of its ``d + k``
   transmissions saw the loss rate ``p_k = k / (d + k)`` (always < 1). The latency expected in
   that scenario is eq (25) evaluated at ``p_k``
   (:func:`tcpdelay.model.transfer.transfer_time_s` without the delayed-ACK term); ``k = 0`` is
   the loss-free slow start of eq (15). Scenarios in the two tails of total probability
   ``tail`` (default 1e-9) are dropped and the rest renormalised; the dropped mass is reported.
   At most :data:`MAX_SCENARIOS` values of ``k`` are used; a wider range (a huge transfer) is
   sampled evenly, each value standing for its neighbourhood (see :func:`loss_scenarios`).
2. **Delayed-ACK cost.** Independent of the losses and uniform on ``[low, high]``
   (:data:`tcpdelay.model.transfer.DELAYED_ACK_PRESETS`: BSD 0–200 ms, Windows 100–200 ms), or a
   constant.
3. **Handshake** (for the total latency): the exact discrete distribution of eqs (1)–(2),
   conditioned on the handshake succeeding (:mod:`tcpdelay.model.handshake`), independent of
   the transfer.

The result is a mixture of point masses ("atoms": handshake latency + scenario latency, with
product weights) each smeared by the same uniform delayed-ACK cost. Its CDF is piecewise
linear between the breakpoints ``atom + low`` and ``atom + high``, so CDF values and quantiles
are computed exactly (no sampling, deterministic).

The mean of this distribution is close to, but not the same as, the eq (25) mean, since eq (25)
applies the formulas to the *expected* loss rather than averaging over loss scenarios; both are
reported by :func:`tcpdelay.model.latency.latency`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError
from tcpdelay.model import handshake
from tcpdelay.model import throughput as tp
from tcpdelay.model import transfer as tr

DEFAULT_TAIL = 1e-9
"""Probability mass of loss scenarios left out (split between the two tails)."""

MAX_SCENARIOS = 4096
"""Most loss scenarios enumerated for one transfer (wider ranges are sampled evenly)."""


@dataclass(frozen=True)
class LatencyDistribution:
    """A mixture of atoms ``atoms_s`` (weights ``weights``, summing to 1), each shifted by an
    independent cost uniform on ``[jitter_low_s, jitter_high_s]`` (a constant when equal).

    ``truncated_mass`` is the probability of the scenarios that were left out before the
    weights were renormalised.
    """

    atoms_s: np.ndarray
    weights: np.ndarray
    jitter_low_s: float = 0.0
    jitter_high_s: float = 0.0
    truncated_mass: float = 0.0

    def mean(self) -> float:
        return float(np.dot(self.atoms_s, self.weights) + 0.5 * (self.jitter_low_s + self.jitter_high_s))

    def cdf(self, t_s):
        """``P[L <= t]`` at the times ``t_s``."""
        t = checks.as_array("t_s", t_s)
        lo, hi = self.jitter_low_s, self.jitter_high_s
        order = np.argsort(self.atoms_s, kind="stable")
        x, w = self.atoms_s[order], self.weights[order]
        cw = np.concatenate([[0.0], np.cumsum(w)])
        if hi == lo:
            return cw[np.searchsorted(x + lo, t, side="right")][()]
        cwx = np.concatenate([[0.0], np.cumsum(w * x)])
        width = hi - lo
        # Atoms with x_i + hi <= t count fully; those with x_i + lo < t < x_i + hi by the
        # fraction (t - x_i - lo) / width of their uniform.
        i_lo = np.searchsorted(x + lo, t, side="right")
        i_hi = np.searchsorted(x + hi, t, side="right")
        ramp = (cw[i_lo] - cw[i_hi]) * (t - lo) - (cwx[i_lo] - cwx[i_hi])
        return np.clip(cw[i_hi] + ramp / width, 0.0, 1.0)[()]

    def quantile(self, q):
        """The smallest ``t`` with ``P[L <= t] >= q`` for ``q`` in [0, 1] (array)."""
        q = checks.probability("quantile", q, allow_one=True)
        lo, hi = self.jitter_low_s, self.jitter_high_s
        order = np.argsort(self.atoms_s, kind="stable")
        x, w = self.atoms_s[order], self.weights[order]
        if hi == lo:
            cw = np.cumsum(w)
            cw[-1] = max(cw[-1], 1.0)
            return (x[np.minimum(np.searchsorted(cw, q * (1 - 1e-12), side="left"), x.size - 1)] + lo)[()]
        knots = np.unique(np.concatenate([x + lo, x + hi]))
        f = self.cdf(knots)
        f = np.maximum.accumulate(f)
        # F is linear between knots; invert, taking the left end of any flat stretch.
        idx = np.clip(np.searchsorted(f, q, side="left"), 1, knots.size - 1)
        f0, f1 = f[idx - 1], f[idx]
        t0, t1 = knots[idx - 1], knots[idx]
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(f1 > f0, (q - f0) / (f1 - f0), 0.0)
        out = t0 + np.clip(frac, 0.0, 1.0) * (t1 - t0)
        return np.where(q <= f[0], knots[0], out)[()]

    def percentiles(self, levels=(50, 90, 99)) -> dict[str, float]:
        """``{"50": t50, ...}`` for percentile levels in [0, 100]."""
        lv = checks.as_array("percentiles", levels)
        if ((lv < 0) | (lv > 100)).any():
            raise ParameterError(f"percentiles: {levels!r} must lie in [0, 100]")
        qs = np.atleast_1d(self.quantile(lv / 100.0))
        return {f"{v:g}": float(t) for v, t in zip(np.atleast_1d(lv), qs)}


def _nbinom_logpmf(k: np.ndarray, d: float, p: float) -> np.ndarray:
    """log P[K = k] for K ~ NegBin(d, p): log C(d+k-1, k) + k log p + d log(1-p)."""
    lgamma = np.vectorize(math.lgamma, otypes=[float])
    return lgamma(k + d) - lgamma(k + 1.0) - math.lgamma(d) + k * math.log(p) + d * math.log1p(-p)


def loss_scenarios(d, p, tail=DEFAULT_TAIL, max_scenarios=MAX_SCENARIOS):
    """Loss scenarios of a transfer of ``d`` segments under Bernoulli loss ``p`` (scalars).

    ``K``, the number of transmissions lost while ``d`` segments get through, is negative
    binomial with mean ``d p/(1-p)`` and standard deviation ``sqrt(d p)/(1-p)``. The scenarios
    are every ``k`` from 0 to ``mean + 40 sd + 50`` when that is at most ``max_scenarios``
    values; otherwise ``max_scenarios`` values spread evenly over ``[mean - 10 sd,
    mean + 40 sd + 50]``, each weighted by its probability times the spacing (a huge transfer,
    whose scenario latencies vary smoothly with ``k``). Then the lowest and highest scenarios
    holding ``tail / 2`` of the probability each are dropped.

    Returns
    -------
    k : ndarray
        Numbers of lost transmissions considered (increasing).
    weight : ndarray
        Their probabilities, renormalised to sum to 1.
    loss_rate : ndarray
        The loss rate each scenario saw, ``k / (d + k)``.
    truncated_mass : float
        Probability of the scenarios left out.
    """
    d = float(checks.at_least("segments", d, 1.0))
    p = float(checks.probability("loss", p))
    if not 0 < tail < 1:
        raise ParameterError(f"tail: {tail!r} must lie in (0, 1)")
    if p == 0:
        return np.array([0.0]), np.array([1.0]), np.array([0.0]), 0.0
    mean = d * p / (1.0 - p)
    sd = math.sqrt(d * p) / (1.0 - p)
    k_hi = math.ceil(mean + 40.0 * sd + 50.0)
    if k_hi + 1 <= max_scenarios:
        k = np.arange(0.0, k_hi + 1.0)
        w = np.exp(_nbinom_logpmf(k, d, p))
    else:
        k_lo = max(0.0, math.floor(mean - 10.0 * sd))
        k = np.unique(np.round(np.linspace(k_lo, k_hi, max_scenarios)))
        edges = np.concatenate([[k[0] - 0.5], 0.5 * (k[1:] + k[:-1]), [k[-1] + 0.5]])
        w = np.exp(_nbinom_logpmf(k, d, p)) * np.diff(edges)
    cum = np.cumsum(w)
    keep = (cum > tail / 2) & (cum - w < cum[-1] - tail / 2)
    k, w = k[keep], w[keep]
    total = float(w.sum())
    return k, w / total, k / (d + k), max(0.0, 1.0 - total)


def transfer_distribution(
    d,
    p,
    rtt_s,
    t0_s=None,
    w1=tr.DEFAULT_INIT_WINDOW,
    b=tr.DEFAULT_ACKS_PER_SEGMENT,
    w_max=np.inf,
    delayed_ack="none",
    tail=DEFAULT_TAIL,
    *,
    min_rounds=1.0,
) -> LatencyDistribution:
    """Distribution of the data-transfer latency (Section II-E) for scalar parameters.

    Parameters are those of :func:`tcpdelay.model.transfer.transfer_time_s`; ``t0_s`` is the
    mean first timeout of the path (default RTT + 200 ms) and stays the same in every scenario.
    """
    rtt = float(checks.positive("rtt_s", rtt_s))
    t0 = float(tp.default_t0_s(rtt)) if t0_s is None else float(checks.positive("t0_s", t0_s))
    lo, hi = tr.delayed_ack_bounds_s(delayed_ack)
    k, w, p_k, cut = loss_scenarios(d, p, tail)
    t_k = tr.transfer_time_s(d, p_k, rtt, t0, w1, b, w_max, "none", min_rounds=min_rounds)
    return LatencyDistribution(np.atleast_1d(t_k).astype(float), w, lo, hi, cut)


def add_handshake(
    dist: LatencyDistribution,
    rtt_s,
    loss_forward,
    loss_reverse,
    syn_timeout_s=handshake.DEFAULT_SYN_TIMEOUT_S,
    syn_retries=handshake.DEFAULT_SYN_RETRIES,
    synack_retries=handshake.DEFAULT_SYNACK_RETRIES,
    *,
    min_weight: float = 1e-15,
) -> LatencyDistribution:
    """The distribution of handshake + transfer latency, the handshake being independent of the
    transfer and conditioned on success (eqs 1–3). Atom pairs with probability below
    ``min_weight`` are dropped (their mass is added to ``truncated_mass``)."""
    h_lat, h_prob = handshake.handshake_distribution(
        rtt_s, loss_forward, loss_reverse, syn_timeout_s, syn_retries, synack_retries
    )
    atoms = (h_lat[:, None] + dist.atoms_s[None, :]).ravel()
    weights = (h_prob[:, None] * dist.weights[None, :]).ravel()
    keep = weights >= min_weight
    dropped = float(weights[~keep].sum())
    kept = weights[keep]
    return LatencyDistribution(
        atoms[keep], kept / kept.sum(), dist.jitter_low_s, dist.jitter_high_s, dist.truncated_mass + dropped
    )
