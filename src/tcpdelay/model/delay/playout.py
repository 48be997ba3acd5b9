"""Playout delay (Brosh et al., Section 6.6, Figures 23-24).

TCP needs at least ``RTT + 3/f`` to detect and repair a loss by fast retransmit; a fixed
playout delay of ``L + RTT + 3/f`` therefore masks the retransmission and head-of-line delay
of a fast-retransmitted packet but not sender backlog or timeouts. :func:`playout_advice`
returns that recommendation, the fraction of packets (and of TCP-delayed packets) it masks,
and the late-packet fraction as a function of the playout delay.
"""

from __future__ import annotations

import numpy as np

from tcpdelay.model.delay.predict import predict, resolve_source


def recommended_playout_s(rtt_s: float, rate_pps: float, one_way_s: float | None = None) -> float:
    """``L + RTT + 3/f`` (Section 8.2), L defaulting to RTT/2."""
    L = rtt_s / 2 if one_way_s is None else one_way_s
    return L + rtt_s + 3.0 / rate_pps


def late_fraction_curve(pred, delays_s=None, points: int = 60) -> dict:
    """``{"playout_delay_s": [...], "late_fraction": [...]}``; by default from L to the
    prediction's max_s (Figure 23)."""
    if delays_s is None:
        lo = pred.one_way_s
        hi = lo + 1.0 if pred.unstable else max(pred.max_s, lo + 1e-3)
        delays_s = np.linspace(lo, hi, points)
    x = np.asarray(delays_s, dtype=float)
    return {"playout_delay_s": x.tolist(), "late_fraction": np.atleast_1d(pred.late_fraction(x)).tolist()}


def playout_advice(profile=None, *, rate_bps=None, packet_bytes=None, rtt_s, loss, one_way_s=None,
                   delays_s=None, **options) -> dict:
    """Playout advice for a source on a path.

    Returns ``{"profile", "rtt_s", "loss", "one_way_s", "recommended_playout_s",
    "late_fraction_at_recommended", "masked_fraction", "masked_tcp_delay_fraction",
    "unstable", "curve": {"playout_delay_s", "late_fraction"}}``. ``masked_fraction`` is the
    share of packets that arrive by the recommended playout time; ``masked_tcp_delay_fraction``
    the same among packets that TCP delayed beyond ``L`` (Figure 24).
    """
    source = resolve_source(profile, rate_bps, packet_bytes)
    pred = predict(source, rtt_s=rtt_s, loss=loss, one_way_s=one_way_s, **options)
    L = pred.one_way_s
    rec = recommended_playout_s(rtt_s, source.rate_pps, L)
    out = {"profile": source.name, "stack": pred.info.get("stack"), "rtt_s": rtt_s, "loss": loss, "one_way_s": L,
           "recommended_playout_s": rec, "unstable": pred.unstable}
    if pred.unstable:
        out.update(late_fraction_at_recommended=1.0, masked_fraction=0.0, masked_tcp_delay_fraction=0.0)
    else:
        on_time = float(pred.cdf(rec))
        delayed = 1.0 - float(pred.cdf(L))
        out.update(
            late_fraction_at_recommended=1.0 - on_time,
            masked_fraction=on_time,
            masked_tcp_delay_fraction=(on_time - float(pred.cdf(L))) / delayed if delayed > 1e-15 else 1.0,
        )
    out["curve"] = late_fraction_curve(pred, delays_s)
    out["prediction"] = pred.statistics()
    return out
