"""TCP latency end to end: handshake + data transfer, mean and percentiles.

Cardwell, Savage, Anderson, "Modeling TCP Latency", INFOCOM 2000: connection establishment
(Section II-C, :mod:`tcpdelay.model.handshake`), data transfer (Section II-D,
:mod:`tcpdelay.model.transfer`) and distributions (Section II-E,
:mod:`tcpdelay.model.latency_distribution`).

:func:`latency` answers one path and one transfer size with every figure ``tcpdelay latency``
prints (its JSON keys are documented in docs/cli.md); :func:`expected_latency_s` is the
vectorised mean for grids of sizes, loss rates and RTTs.

Direction conventions: data flows from the server (passive opener) to the client, as in the
paper. ``loss`` is the loss rate in that direction (the paper's ``p`` and ``p_f``: data
segments and SYN/ACKs); ``loss_reverse`` is the loss rate client -> server (``p_r``: SYNs; ACK
loss is not modelled during the transfer). ``loss_reverse`` defaults to ``loss`` (a symmetric
path).
"""

from __future__ import annotations

import math

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError
from tcpdelay.model import handshake, latency_distribution as ld
from tcpdelay.model import throughput as tp
from tcpdelay.model import transfer as tr

DEFAULT_MSS_BYTES = 1460
DEFAULT_PERCENTILES = (50, 90, 99)



MAX_SEGMENTS = 1e15
"""The largest transfer :func:`latency` takes, in segments (about 1.4 EB at MSS 1460)."""

def expected_latency_s(
    size_bytes,
    rtt_s,
    loss,
    *,
    mss_bytes=DEFAULT_MSS_BYTES,
    loss_reverse=None,
    syn_timeout_s=handshake.DEFAULT_SYN_TIMEOUT_S,
    syn_retries=handshake.DEFAULT_SYN_RETRIES,
    synack_retries=handshake.DEFAULT_SYNACK_RETRIES,
    t0_s=None,
    init_window=tr.DEFAULT_INIT_WINDOW,
    acks_per_segment=tr.DEFAULT_ACKS_PER_SEGMENT,
    max_window=np.inf,
    delayed_ack="none",
    handshake_included: bool = True,
    min_rounds=1.0,
):
    """Expected latency in seconds, vectorised over every array argument (broadcast together).

    ``E[L_h | success]`` (eqs 1–2, exact over the retry limits) + ``E[T]`` (eq 25), or ``E[T]``
    alone with ``handshake_included=False``. Parameters as in :func:`latency`.
    """
    d = tr.segments_for(size_bytes, mss_bytes)
    t0 = tp.default_t0_s(rtt_s) if t0_s is None else t0_s
    max_window = np.inf if max_window is None else max_window
    t = tr.transfer_time_s(
        d, loss, rtt_s, t0, init_window, acks_per_segment, max_window, delayed_ack, min_rounds=min_rounds
    )
    if not handshake_included:
        return t
    pr = loss if loss_reverse is None else loss_reverse
    h = handshake.handshake_mean_s(rtt_s, loss, pr, syn_timeout_s, syn_retries, synack_retries)
    return (np.asarray(h) + t)[()]


def latency(
    size_bytes,
    rtt_s,
    loss,
    *,
    mss_bytes=DEFAULT_MSS_BYTES,
    loss_reverse=None,
    syn_timeout_s=handshake.DEFAULT_SYN_TIMEOUT_S,
    syn_retries=handshake.DEFAULT_SYN_RETRIES,
    synack_retries=handshake.DEFAULT_SYNACK_RETRIES,
    t0_s=None,
    init_window=tr.DEFAULT_INIT_WINDOW,
    acks_per_segment=tr.DEFAULT_ACKS_PER_SEGMENT,
    max_window=math.inf,
    delayed_ack="none",
    percentiles=DEFAULT_PERCENTILES,
    min_rounds=1.0,
) -> dict:
    """Latency of one transfer of ``size_bytes`` over one path (scalar parameters).

    Parameters
    ----------
    size_bytes : float
        Bytes to transfer (> 0); ``ceil(size_bytes / mss_bytes)`` segments.
    rtt_s : float
        Round-trip time, seconds.
    loss : float
        Loss rate server -> client (data and SYN/ACK direction), in [0, 1).
    mss_bytes : float, optional
        Segment payload size (default 1460).
    loss_reverse : float, optional
        Loss rate client -> server (SYN direction); default ``loss``.
    syn_timeout_s, syn_retries, synack_retries : optional
        Handshake: initial SYN timeout (1 s) and retry limits (6 and 5, Linux defaults).
    t0_s : float, optional
        Mean first retransmission timeout of the data transfer (default RTT + 200 ms).
    init_window : float, optional
        Initial congestion window in segments (default 10).
    acks_per_segment : float, optional
        b, segments per ACK; slow start grows by ``1 + 1/b`` per round (default 1).
    max_window : float, optional
        Window limit in segments (default unlimited).
    delayed_ack : {"none", "bsd", "windows"} or float, optional
        Cost of the first delayed ACK (default none).
    percentiles : sequence of float, optional
        Percentile levels to report (default 50, 90, 99).
    min_rounds : float, optional
        Floor of the slow-start round count, times ``1 - p`` (default 1: a transfer takes at
        least one RTT; 0 reproduces the paper's eq 15 exactly). See
        :func:`tcpdelay.model.transfer.slow_start_time_s`.

    Returns
    -------
    dict
        The inputs as used (``size_bytes``, ``segments``, ``mss_bytes``, ``rtt_s``, ``loss``,
        ``loss_reverse``, ``syn_timeout_s``, ``syn_retries``, ``synack_retries``, ``t0_s``,
        ``init_window``, ``acks_per_segment``, ``max_window`` (None = unlimited),
        ``delayed_ack``) and the results: ``handshake_mean_s`` (exact, successful handshakes),
        ``handshake_mean_approx_s`` (eq 4; None where undefined, ``p >= 0.5``),
        ``handshake_failure_prob``, ``slow_start_segments``, ``slow_start_window``,
        ``slow_start_s``, ``first_loss_s``, ``remainder_s``, ``delayed_ack_s``,
        ``transfer_mean_s`` (eq 25), ``total_mean_s`` (handshake + transfer),
        ``effective_throughput_bps`` (size / transfer mean), ``steady_state_pftk_bps`` (eq 22,
        None at ``p = 0`` without a window limit), ``percentiles_s`` and
        ``transfer_percentiles_s`` (``{"50": ..., "90": ..., "99": ...}``; total and transfer
        only, Section II-E), ``distribution_mean_s`` (mean of that distribution) and
        ``distribution_truncated_mass``.
    """
    for name, value in (("size_bytes", size_bytes), ("rtt_s", rtt_s), ("loss", loss), ("mss_bytes", mss_bytes)):
        if np.ndim(value):
            raise ParameterError(f"{name}: latency() takes one value; use expected_latency_s for arrays")
    p_f = float(checks.probability("loss", loss))
    p_r = p_f if loss_reverse is None else float(checks.probability("loss_reverse", loss_reverse))
    rtt = float(checks.positive("rtt_s", rtt_s))
    mss = float(checks.positive("mss_bytes", mss_bytes))
    t0 = float(tp.default_t0_s(rtt)) if t0_s is None else float(checks.positive("t0_s", t0_s))
    w_max = math.inf if max_window is None else float(max_window)
    d = float(tr.segments_for(size_bytes, mss))
    if d > MAX_SEGMENTS:
        raise ParameterError(
            f"size_bytes: {float(size_bytes):g} is {d:.3g} segments of {mss:g} bytes; the latency distribution "
            f"is computed for at most {MAX_SEGMENTS:.0e} segments (beyond it double precision cannot tell "
            "one loss from none)")

    comp = tr.transfer_components(
        d, p_f, rtt, t0, init_window, acks_per_segment, w_max, delayed_ack, min_rounds=min_rounds
    )
    h_mean = float(handshake.handshake_mean_s(rtt, p_f, p_r, syn_timeout_s, syn_retries, synack_retries))
    h_approx = float(handshake.handshake_mean_approx_s(rtt, p_f, p_r, syn_timeout_s))
    h_ok = float(handshake.handshake_success_probability(p_f, p_r, syn_retries, synack_retries))

    t_dist = ld.transfer_distribution(
        d, p_f, rtt, t0, init_window, acks_per_segment, w_max, delayed_ack, min_rounds=min_rounds
    )
    tot_dist = ld.add_handshake(t_dist, rtt, p_f, p_r, syn_timeout_s, syn_retries, synack_retries)

    transfer_mean = float(comp["transfer_mean_s"])
    r_ss = float(tp.pftk_segments_per_s(p_f, rtt, t0, acks_per_segment, w_max))
    return {
        "size_bytes": float(size_bytes),
        "segments": d,
        "mss_bytes": mss,
        "rtt_s": rtt,
        "loss": p_f,
        "loss_reverse": p_r,
        "syn_timeout_s": float(syn_timeout_s),
        "syn_retries": int(syn_retries),
        "synack_retries": int(synack_retries),
        "t0_s": t0,
        "init_window": float(init_window),
        "acks_per_segment": float(acks_per_segment),
        "max_window": None if math.isinf(w_max) else w_max,
        "delayed_ack": str(delayed_ack).lower() if isinstance(delayed_ack, str) else float(delayed_ack),
        "handshake_mean_s": h_mean,
        "handshake_mean_approx_s": None if math.isnan(h_approx) else h_approx,
        "handshake_failure_prob": 1.0 - h_ok,
        "slow_start_segments": float(comp["slow_start_segments"]),
        "slow_start_window": float(comp["slow_start_window"]),
        "slow_start_s": float(comp["slow_start_s"]),
        "first_loss_s": float(comp["first_loss_s"]),
        "remainder_s": float(comp["remainder_s"]),
        "delayed_ack_s": float(comp["delayed_ack_s"]),
        "transfer_mean_s": transfer_mean,
        "total_mean_s": h_mean + transfer_mean,
        "effective_throughput_bps": 8.0 * float(size_bytes) / transfer_mean,
        "steady_state_pftk_bps": None if math.isinf(r_ss) else r_ss * mss * 8.0,
        "percentiles_s": tot_dist.percentiles(percentiles),
        "transfer_percentiles_s": t_dist.percentiles(percentiles),
        "distribution_mean_s": tot_dist.mean(),
        "distribution_truncated_mass": tot_dist.truncated_mass,
    }
