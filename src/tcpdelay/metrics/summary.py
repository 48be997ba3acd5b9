"""Every applicable metric of a recorded run's flows, as one JSON-able dict (``tcpdelay metrics``;
the flows of a run directory: :func:`tcpdelay.results.runs.summarize_run`).

Per flow: packet counts and loss, delay statistics, RFC 3550 jitter, late and miss fractions
over a list of playout delays, RTPI / delayed packets rate / packet loss rate, goodput and TCP
retransmissions; for flows without frames (voice) the jitter filter, the loss-period quality
levels and the E-model MOS; for video flows the picture discards and playout-buffer underflow
events. Across flows: Jain's fairness index of the goodputs. The keys are documented in
docs/cli.md ("tcpdelay metrics").

``run.json`` keys read (all optional): ``clock`` ("unsynchronized" -> relative delays),
``duration_s`` or ``sender.params.duration_s`` (goodput's connection time),
``cross_traffic_start_s`` (the jitter filter's base
delay window, on the send-time clock), ``fps`` (video frame rate; inferred from the send times
otherwise), ``tcp_stats`` or ``sender.result.tcp_info_end`` (TCP retransmissions, see
:mod:`tcpdelay.metrics.tcp_stats`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from tcpdelay import checks
from tcpdelay.errors import ParameterError
from tcpdelay.metrics import delay as dl
from tcpdelay.metrics import emodel, fairness, jitter_filter, quality, rtpi, video
from tcpdelay.metrics.packets import FlowPackets
from tcpdelay.metrics.tcp_stats import retransmissions_by_flow, run_duration_s

DEFAULT_PLAYOUT_DELAYS_S = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class MetricOptions:
    """Parameters of the metrics (defaults follow the papers)."""

    playout_delays_s: tuple[float, ...] = DEFAULT_PLAYOUT_DELAYS_S
    jitter_buffer_s: float = jitter_filter.DEFAULT_JITTER_BUFFER_S
    rtpi_threshold_s: float = rtpi.DEFAULT_THRESHOLD_S
    startup_delay_s: float = video.DEFAULT_STARTUP_DELAY_S
    buffer_bytes: float = math.inf
    codec: str = "g711-plc"
    cross_traffic_start_s: float | None = None
    """Overrides run.json's; None = use run.json's, if any."""
    fps: float | None = None
    """Overrides run.json's / the inferred frame rate."""
    series: bool = False
    """Include the quality levels over time (bins of ``series_bin_s``)."""
    series_bin_s: float = 0.1
    late_target: float = 0.01
    """Report the playout delay that keeps the late fraction at or below this."""

    def __post_init__(self) -> None:
        pd = tuple(float(x) for x in np.atleast_1d(
            checks.non_negative("playout_delay_s", list(self.playout_delays_s))))
        if not pd:
            raise ParameterError("playout_delay_s: give at least one playout delay")
        object.__setattr__(self, "playout_delays_s", tuple(sorted(set(pd))))
        checks.non_negative("jitter_buffer_s", self.jitter_buffer_s)
        checks.positive("rtpi_threshold_s", self.rtpi_threshold_s)
        checks.non_negative("startup_delay_s", self.startup_delay_s)
        checks.positive("buffer_bytes", self.buffer_bytes, allow_inf=True)
        checks.positive("series_bin_s", self.series_bin_s)
        checks.probability("late_target", self.late_target)
        if self.fps is not None:
            checks.positive("fps", self.fps)
        if self.codec not in emodel.CODECS:
            raise ParameterError(f"codec: {self.codec!r} is not one of {', '.join(emodel.CODECS)}")


def _first_send_s(flow: FlowPackets) -> float | None:
    """When the flow's connection time began, on its arrival clock: its first packet's send
    time (plus the clock offset between the two ends); None without packets."""
    s = flow.send_time_s[np.isfinite(flow.send_time_s)]
    return float(s.min()) + flow.clock_offset_s if s.size else None


def packet_interval_s(flow: FlowPackets) -> float | None:
    """Nominal packet interval: the median spacing of send times between consecutive sequence
    numbers (talk-spurt silences and video bursts do not move the median)."""
    s = flow.send_time_s
    ok = np.isfinite(s[1:]) & np.isfinite(s[:-1]) & (np.diff(flow.seq) == 1)
    gaps = np.diff(s)[ok]
    gaps = gaps[gaps > 0]
    return float(np.median(gaps)) if gaps.size else None


def media_class(flow: FlowPackets, profile: str | None) -> str | None:
    """``voice`` or ``video`` by the flow's profile (a flow with frames is video); None when
    neither says (a custom CBR flow, a run that did not record its profiles)."""
    from tcpdelay.profiles import PROFILES

    if profile in PROFILES:
        return "voice" if PROFILES[profile].voice else "video"
    return "video" if flow.has_frames else None


def without_voice_metrics(m: dict, profile: str | None) -> dict:
    """A flow's stored metrics (a committed ``metrics.json``, measured before the profile was
    read) as :func:`flow_metrics` gives them now: ``profile`` and ``media`` set, and a video
    flow without the voice metrics (jitter filter, quality levels, E-model) it was given."""
    from tcpdelay.profiles import PROFILES

    media = m.get("media") or ("video" if m.get("video") else None)
    if profile in PROFILES:
        media = "voice" if PROFILES[profile].voice else "video"
    out = {**m, "profile": m.get("profile") or profile, "media": media}
    if media == "video":
        for key in ("jitter_filter", "quality", "emodel"):
            out.pop(key, None)
    return out


def flow_metrics(flow: FlowPackets, meta: dict, opts: MetricOptions,
                 retrans: dict[int, int] | None = None, profile: str | None = None) -> dict:
    """All applicable metrics of one flow (``profile``: its media profile, when known: a video
    profile's flow gets no voice metrics, a G.711 MOS least of all)."""
    delay = flow.delay_s
    n = len(flow)
    relative = flow.clock_offset_s != 0.0 or meta.get("clock") == "unsynchronized"
    pd = np.asarray(opts.playout_delays_s)
    interval = packet_interval_s(flow)
    out: dict = {
        "flow_id": flow.flow_id,
        "kind": "video" if flow.has_frames else "stream",
        "inferred_from_received": flow.inferred,
        "packets": {**dl.loss_summary(flow.lost, flow.dropped),
                    "received": int(np.count_nonzero(flow.received)),
                    "duplicates": flow.duplicates,
                    "unmatched_received": flow.unmatched_received,
                    "bytes_received": int(flow.size_bytes[flow.received].sum())},
        "delay": {**dl.delay_stats(delay), "relative_to_min": relative,
                  "clock_offset_s": flow.clock_offset_s},
        "jitter_rfc3550_s": _last(dl.interarrival_jitter(flow.send_time_s, flow.recv_time_s)),
        "late": {
            "playout_delay_s": list(opts.playout_delays_s),
            "late_fraction": dl.late_fraction(delay, pd).tolist(),
            "miss_fraction": dl.miss_fraction(delay, pd).tolist(),
            "target_late_fraction": opts.late_target,
            "playout_delay_for_target_s": dl.playout_delay_for_late_fraction(delay,
                                                                             opts.late_target),
        },
        "rtpi": rtpi.real_time_performance(flow.recv_time_s, n, opts.rtpi_threshold_s,
                                           send_time_s=flow.send_time_s,
                                           nominal_interval_s=interval),
        "goodput_bps": fairness.goodput_bps(flow.size_bytes, flow.recv_time_s, run_duration_s(meta),
                                            start_s=_first_send_s(flow)),
        "tcp_retransmissions": (retrans or {}).get(flow.flow_id),
    }
    out["packet_interval_s"] = interval
    out["profile"], out["media"] = profile, media_class(flow, profile)
    if flow.has_frames:
        out["video"] = _video(flow, meta, opts)
    elif n and np.isfinite(delay).any() and out["media"] != "video":
        out.update(_voice(flow, meta, opts, interval or 0.02))
    return out


def _voice(flow: FlowPackets, meta: dict, opts: MetricOptions, interval: float) -> dict:
    delay = flow.delay_s
    start = opts.cross_traffic_start_s
    if start is None:
        start = meta.get("cross_traffic_start_s")
    base_from = "cross_traffic_window" if start is not None else "whole_flow"
    try:
        base = jitter_filter.base_delay_s(flow.send_time_s, delay, start)
    except ParameterError:
        if start is None:
            raise
        base = jitter_filter.base_delay_s(flow.send_time_s, delay, None)
        base_from = "whole_flow (no packet in the window)"
    status = jitter_filter.classify(delay, base, opts.jitter_buffer_s)
    unusable = status != jitter_filter.ON_TIME
    levels = quality.loss_period_levels(unusable, interval)
    q = quality.level_summary(levels)
    if opts.series:
        t0 = 0.0 if start is None else float(start)
        t = flow.send_time_s
        q["over_time"] = quality.quality_over_time(
            t if start is not None else t - np.nanmin(t), levels, opts.series_bin_s, t0)
    per_delay = [emodel.voip_quality(delay, d, packetization_s=interval, codec=opts.codec,
                                     dropped=flow.dropped) for d in opts.playout_delays_s]
    best = max(per_delay, key=lambda x: x["r"])
    return {
        "jitter_filter": {"base_delay_s": base, "base_delay_from": base_from,
                          "cross_traffic_start_s": start, "jitter_buffer_s": opts.jitter_buffer_s,
                          **jitter_filter.summarize(status)},
        "quality": {"packet_interval_s": interval, **q},
        "emodel": {"codec": opts.codec, "codec_name": emodel.CODECS[opts.codec].name,
                   "packetization_s": interval, "per_playout_delay": per_delay, "best": best,
                   "delay_relative_to_min": flow.clock_offset_s != 0.0},
    }


def _video(flow: FlowPackets, meta: dict, opts: MetricOptions) -> dict:
    frames = video.frames_from_packets(flow.frame_id, flow.frame_type, flow.frame_last,
                                       flow.size_bytes, flow.send_time_s, flow.recv_time_s)
    fps = opts.fps or meta.get("fps")
    fps_from = "option" if opts.fps else ("run.json" if fps else "send times")
    if not fps:
        fps = video.infer_fps(frames)
    res = video.playout(frames, float(fps), startup_delay_s=opts.startup_delay_s,
                        buffer_bytes=opts.buffer_bytes)
    return {"fps": float(fps), "fps_from": fps_from, "startup_delay_s": opts.startup_delay_s,
            "buffer_bytes": opts.buffer_bytes, **res}


def _last(a: np.ndarray) -> float | None:
    return float(a[-1]) if a.size else None


def summarize_flows(flows: list[FlowPackets], meta: dict, opts: MetricOptions | None = None,
                    profiles: dict[int, str] | None = None) -> dict:
    """Every flow's metrics and Jain's index of their goodputs (``profiles``: flow id -> media
    profile, where known). The index compares flows of one kind: across voice and video flows
    (a 64 kb/s call beside 573 kb/s video) it measures their rates, not fairness, so a run of
    both kinds has it per kind (``by_media``) and none overall."""
    opts = opts or MetricOptions()
    retrans = retransmissions_by_flow(meta)
    per_flow = [flow_metrics(f, meta, opts, retrans, (profiles or {}).get(f.flow_id)) for f in flows]
    kinds = {f["media"] for f in per_flow}
    return {
        "clock": meta.get("clock", "shared"),
        "delay_relative_to_min": any(f.clock_offset_s != 0.0 for f in flows),
        "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(opts).items()},
        "flows": per_flow,
        "fairness": {"flows": len(per_flow),
                     "jain_index_goodput": _jain(per_flow) if len(kinds) <= 1 else None,
                     **({"by_media": {k: {"flows": sum(f["media"] == k for f in per_flow),
                                          "jain_index_goodput": _jain([f for f in per_flow if f["media"] == k])}
                                      for k in sorted(kinds, key=str) if k is not None}} if len(kinds) > 1 else {})},
    }


def _jain(per_flow: list[dict]) -> float | None:
    """Jain's index of the flows' goodputs; None unless every one is known."""
    goodputs = [f["goodput_bps"] for f in per_flow]
    finite = [g for g in goodputs if g is not None and math.isfinite(g)]
    return fairness.jain_index(finite) if len(finite) == len(goodputs) and finite else None
