"""One call from path parameters to a delay distribution: :func:`predict`.

Designed so that comparing the model with a measurement is one call: pass the measured RTT,
loss rate and (optionally) one-way delay and T0, get a :class:`DelayPrediction` whose
``cdf``/``quantile``/``late_fraction`` can be set against measured per-packet delays.
"""

from __future__ import annotations

import math
import time

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.model.delay import repair
from tcpdelay.model.delay.chain import build_chain
from tcpdelay.model.delay.chain_states import segment_loss as chain_segment_loss
from tcpdelay.model.delay.distribution import (DelayPrediction, chain_statistics, packet_distribution,
                                              window_time_shares)
from tcpdelay.model.delay.params import DelayParams
from tcpdelay.model.delay.profiles import Profile, custom_profile, get_profile
from tcpdelay.model.delay.solve import solve_chain
from tcpdelay.model.delay.stacks import DEFAULT_STACK
from tcpdelay.model.delay.stacks import rules as stack_rules
from tcpdelay.model.throughput import pftk_segments_per_s


MAX_SPLIT = 255
"""split-N: at most this many pieces per packet (Section 7.1; the testbed's sender takes the same)."""
MAX_CONNECTIONS = 64
"""Parallel connections of the round-robin model (Section 7.2; the testbed's sender takes the same)."""

CHOICE_OPTIONS = frozenset({
    "al_fr_backlog", "backlog_rounding", "growth_requires_backlog", "count_fresh_packets",
    "hol_ramp", "max_window", "backlog_bound_packets", "truncation_tol", "max_states",
})
"""The options :func:`predict` passes through to :class:`DelayParams` besides its own."""


def tcp_throughput_bps(params: DelayParams) -> float:
    """PFTK eq (22) throughput of full segments (no receiver-window limit), in bits/s."""
    seg = float(pftk_segments_per_s(params.loss, params.rtt_s, params.t0_s, 1, np.inf))
    return seg * params.mss_bytes * 8.0


def resolve_source(profile=None, rate_bps=None, packet_bytes=None) -> Profile:
    """A :class:`Profile` from a name, a Profile, or a custom rate and packet size."""
    if profile is not None:
        if rate_bps is not None or packet_bytes is not None:
            raise ParameterError("give either a profile or rate_bps and packet_bytes, not both")
        return profile if isinstance(profile, Profile) else get_profile(str(profile))
    if rate_bps is None or packet_bytes is None:
        raise ParameterError("give a profile, or both rate_bps and packet_bytes")
    return custom_profile(rate_bps, packet_bytes)


def solve_params(params: DelayParams, *, force: bool = False) -> DelayPrediction:
    """Solve one chain (one connection), growing the backlog bound while the stationary mass
    at it exceeds ``params.truncation_tol``."""
    t_start = time.perf_counter()
    tput = tcp_throughput_bps(params)
    ratio = tput / params.rate_bps if params.rate_bps > 0 else math.inf
    info = {
        "rate_bps": params.rate_bps,
        "tcp_throughput_bps": tput,
        "throughput_ratio": ratio,
    }
    warnings: list[str] = []
    unstable = not (ratio > 1.0)
    if unstable:
        warnings.append(
            f"unstable: TCP's achievable throughput (PFTK, {tput:.4g} b/s) does not exceed the "
            f"source's {params.rate_bps:.4g} b/s; the backlog, hence the delay, grows without bound")
    if unstable and not force:
        info.update(states=0, recurrent_states=0, truncated_mass=None, backlog_share=None,
                    solve_s=time.perf_counter() - t_start, warnings=warnings,
                    params=params.to_dict())
        return DelayPrediction(np.zeros(0), np.zeros(0), True, params.one_way_s, info)
    for name, bound, what in (("rtt_s", params.max_window, "window bound"),
                              ("t0_s", params.backlog_bound_packets, "backlog bound")):
        if bound > params.max_states:
            value = params.rtt_s if name == "rtt_s" else params.t0_s
            raise ParameterError(
                f"{name}: {value:g} s at {params.rate_pps:g} packets/s needs a {what} of {bound} "
                f"(f*RTT = {params.r:g} packets per round trip), more than the largest chain "
                f"({params.max_states} states) can hold")
    while True:
        chain = build_chain(params, reachable_only=True)
        pi, rc = solve_chain(chain)
        stats = chain_statistics(chain, pi)
        W, Bm = params.max_window, params.backlog_bound_packets
        next_states = (2 * W + 6) * (2 * Bm + 1)
        # An unstable chain (forced) always piles up at the bound: growing it would not converge.
        if (not unstable and stats["truncated_mass"] > params.truncation_tol
                and next_states <= params.max_states):
            params = params.with_backlog_bound(2 * Bm)
            continue
        break
    if stats["truncated_mass"] > params.truncation_tol:
        warnings.append(
            f"truncated: {stats['truncated_mass']:.2g} of the stationary mass sits at the backlog "
            f"bound of {params.backlog_bound_packets} packets even at the largest chain allowed; "
            "the upper percentiles are underestimated")
    if not chain.residual < 1e-6:
        warnings.append(f"inaccurate: the stationary solve's residual is {chain.residual:.2g}")
    support, pmf, share = packet_distribution(chain, pi)
    if params.stack != "paper":
        support, pmf, share, hol_info = _with_head_of_line(params, support, pmf,
                                                           window_time_shares(chain, pi))
        info.update(hol_info)
    info.update(
        backlog_share=share,
        states=chain.space.n,
        recurrent_states=int(rc.size),
        transitions=int(chain.Q.nnz),
        residual=chain.residual,
        backlog_bound_packets=params.backlog_bound_packets,
        max_window=params.max_window,
        **stats,
    )
    info["solve_s"] = time.perf_counter() - t_start
    info["warnings"] = warnings
    info["params"] = params.to_dict()
    return DelayPrediction(support, pmf, unstable, params.one_way_s, info)


def _with_head_of_line(params: DelayParams, support, pmf, windows):
    """The ``linux``/``classic`` stacks: the chain's sender-side delays plus the receiver's
    head-of-line delay of the stack's repairs (:mod:`tcpdelay.model.delay.repair`), their
    repair times mixed over the chain's windows (``windows``: segments and time shares; a
    window below ``f·RTT`` spaces the transmissions that reveal a loss ``RTT/w`` apart,
    :func:`.repair.repair_time_mixture`)."""
    rules_ = stack_rules(params.stack)
    m = repair.grid_substeps(params.rate_pps)
    step = 1.0 / (params.rate_pps * m)
    p_pkt = chain_segment_loss(params, params.packet_bytes)
    # the repairs the RTO sent, apart, where the packets behind them drain slower than written
    stride = repair.rto_drain_stride(rules_, rate_pps=params.rate_pps, rtt_s=params.rtt_s,
                                     packets_per_segment=params.packets_per_segment, substeps=m)
    rto_part: list | None = [] if stride is not None else None
    R = repair.repair_time_mixture(rules_, *windows, loss=p_pkt, rate_pps=params.rate_pps,
                                   rtt_s=params.rtt_s, t0_s=params.t0_s, substeps=m, rto_part=rto_part)
    H = repair.hol_pmf(R, loss=p_pkt, substeps=m, rto_pmf=rto_part[0] if rto_part else None, rto_stride=stride)
    backlog_s = float(np.dot(support - params.one_way_s, pmf))
    support, pmf = repair.add_hol(support, pmf, params.one_way_s, H, step)
    grid = np.arange(R.size) * step
    hgrid = np.arange(H.size) * step
    tcp_level = float(np.dot(support, pmf)) - params.one_way_s
    share = min(max(backlog_s / tcp_level, 0.0), 1.0) if tcp_level > 1e-12 else 0.0
    return support, pmf, share, {
        "stack": params.stack,
        "repair_mean_s": float(np.dot(grid, R) / R.sum()) if R.size and R.sum() > 0 else 0.0,
        "hol_mean_s": float(np.dot(hgrid, H)),
        "held_fraction": float(1.0 - H[0]) if H.size else 0.0,
        "sender_wait_mean_s": backlog_s,
    }


def predict(profile=None, *, rate_bps=None, packet_bytes=None, rtt_s, loss, one_way_s=None,
            mss_bytes=1448, t0_s=None, loss_model="random", queue="packets",
            limited_transmit=True, split=1, connections=1, force=False, stack=DEFAULT_STACK,
            **choices) -> DelayPrediction:
    """Predicted per-packet delay of a CBR source over TCP (Brosh et al., Section 4).

    Parameters
    ----------
    profile : a built-in profile name (``voip``, ``video``, ...; see
        :data:`tcpdelay.model.delay.profiles.PROFILES`) or a :class:`Profile`; or give
        ``rate_bps`` (on TCP, headers included) and ``packet_bytes`` instead.
    rtt_s, loss, one_way_s, mss_bytes, t0_s, loss_model, queue, limited_transmit :
        see :class:`~tcpdelay.model.delay.params.DelayParams`.
    split : split-N (Section 7.1): every packet becomes N packets of a/N bytes at N·f.
    connections : blind round-robin over N parallel connections (Section 7.2): each
        connection is a chain at f/N; packets are spread evenly, so the delay distribution is
        the equal mixture of the per-connection distributions.
    force : solve even when the source's rate exceeds TCP's throughput (the result then
        depends on the truncation bound and is flagged ``unstable``).
    stack : whose loss recovery (:mod:`tcpdelay.model.delay.stacks`): ``"linux"`` [default]
        — today's Linux (RACK-TLP, CUBIC, PRR), ``"classic"`` — three duplicate ACKs and RTOs
        (ns-3, kernels before RACK), ``"paper"`` — Brosh et al.'s Table 6 as published.
    **choices : the [choice] options of :class:`DelayParams` (``al_fr_backlog``,
        ``backlog_rounding``, ``growth_requires_backlog``, ``count_fresh_packets``,
        ``hol_ramp`` (the head-of-line ramp behind each fast retransmit, not the paper's;
        docs/models/delay.md), ``max_window``, ``backlog_bound_packets``, ``truncation_tol``, ``max_states``).
    """
    src = resolve_source(profile, rate_bps, packet_bytes)
    n_split = _count("split", split, MAX_SPLIT)
    n_conn = _count("connections", connections, MAX_CONNECTIONS)
    unknown = set(choices) - CHOICE_OPTIONS
    if unknown:
        raise ParameterError(f"unknown option(s): {', '.join(sorted(unknown))}")
    params = DelayParams(
        rate_pps=src.rate_pps * n_split / n_conn,
        packet_bytes=src.packet_bytes / n_split,
        rtt_s=rtt_s, loss=loss, one_way_s=one_way_s, mss_bytes=mss_bytes, t0_s=t0_s,
        loss_model=loss_model, queue=queue, limited_transmit=limited_transmit, stack=stack, **choices)
    per_conn = solve_params(params, force=force)
    pred = per_conn if n_conn == 1 else mixture([per_conn] * n_conn)
    pred.info.update(stack=params.stack, profile=src.name, split=n_split, connections=n_conn,
                     source_rate_bps=src.rate_bps, source_packet_bytes=src.packet_bytes)
    return pred


def mixture(parts: list[DelayPrediction], weights=None) -> DelayPrediction:
    """Packet-weighted mixture of per-connection distributions (blind round-robin)."""
    if not parts:
        raise ParameterError("mixture of no distributions")
    weights = np.full(len(parts), 1.0 / len(parts)) if weights is None else np.asarray(weights, float)
    info = dict(parts[0].info)
    info["per_connection"] = [p.info for p in parts]
    if any(p.unstable for p in parts):
        return DelayPrediction(np.zeros(0), np.zeros(0), True, parts[0].one_way_s, info)
    keys = np.round(np.concatenate([p.support_s for p in parts]), 9)
    mass = np.concatenate([p.pmf * w for p, w in zip(parts, weights)])
    support, inv = np.unique(keys, return_inverse=True)
    pmf = np.zeros(support.size)
    np.add.at(pmf, inv, mass)
    info["solve_s"] = sum(p.info.get("solve_s", 0.0) for p in parts)
    info["backlog_share"] = float(np.dot(weights, [p.info["backlog_share"] for p in parts]))
    return DelayPrediction(support, pmf / pmf.sum(), False, parts[0].one_way_s, info)


def _count(name: str, value, upper: int) -> int:
    try:
        v = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ParameterError(f"{name}: {value!r} is not an integer") from None
    if v < 1 or v != value or v > upper:
        raise ParameterError(f"{name}: {value!r} must be an integer in [1, {upper}]")
    return v
