"""The repetitions of a cell joined, per media flow.

:func:`aggregate_cell` takes the delay statistics (mean, standard deviation, percentiles) and
the late fractions over the *pooled* packets of every repetition — as Brosh et al. §5.1 average
their ten five-minute runs — with the spread of the per-run means; loss over the pooled packets;
the per-run figures that have no pooled form (E-model MOS, share of acceptable quality, RTPI,
goodput, Jain's index) as the mean over the repetitions.
"""

from __future__ import annotations

import math

import numpy as np

from tcpdelay.metrics import delay as dl
from tcpdelay.results.load import CellData, FlowRun

#: Playout delays (s) of the late fractions (the report's plots and JSON).
PLOT_PLAYOUT_DELAYS_S = tuple(np.round(np.concatenate([np.arange(0.02, 0.2, 0.01),
                                                         np.arange(0.2, 1.0, 0.05),
                                                         np.arange(1.0, 5.01, 0.25)]), 4).tolist())


def finite_mean(values) -> float | None:
    """The mean of the finite values (None when there is none)."""
    v = [float(x) for x in values if x is not None and math.isfinite(float(x))]
    return float(np.mean(v)) if v else None


def aggregate_cell(cell: CellData) -> list[dict]:
    """Per media flow of ``cell``: its repetitions joined (see the module doc)."""
    by_flow: dict[int, list[FlowRun]] = {}
    for run in cell.runs:
        if run.status == "complete":
            for f in run.flows:
                by_flow.setdefault(f.flow_id, []).append(f)
    out = []
    for fid in sorted(by_flow):
        frs = by_flow[fid]
        pooled = all(f.delay_s is not None for f in frs)
        if pooled:
            delays = np.concatenate([f.delay_s for f in frs]) if frs else np.zeros(0)
            dropped = np.concatenate([f.dropped for f in frs]) if frs else np.zeros(0, bool)
            on_wire = int(np.count_nonzero(~dropped))
            received = int(np.count_nonzero(np.isfinite(delays)))
            packets, loss = int(delays.size), (on_wire - received) / on_wire if on_wire else None
            delay = dl.delay_stats(delays)
            late = dl.late_fraction(delays, PLOT_PLAYOUT_DELAYS_S).tolist() if delays.size else None
        else:  # a repetition without per-packet delays: its metrics.json figures, not pooled
            delay, packets, received, loss, late = _unpooled(frs)
        run_means = [f.metrics["delay"]["mean_s"] for f in frs if f.metrics["delay"]["mean_s"] is not None]
        voice = [f.metrics for f in frs if "emodel" in f.metrics]
        out.append({
            "flow_id": fid,
            "name": frs[0].name,
            "runs": len(frs),
            "pooled": pooled,
            "packets": packets,
            "received": received,
            "loss_rate": loss,
            "delay": delay,
            "run_mean_delay_s": {"min": min(run_means) if run_means else None,
                                 "max": max(run_means) if run_means else None,
                                 "std": float(np.std(run_means)) if run_means else None},
            "late": {"playout_delay_s": list(PLOT_PLAYOUT_DELAYS_S), "late_fraction": late},
            "mos": finite_mean(v["emodel"]["best"]["mos"] for v in voice) if voice else None,
            "acceptable_quality_fraction": finite_mean(v["quality"]["acceptable_fraction"] for v in voice)
            if voice else None,
            "rtpi": finite_mean(f.metrics["rtpi"].get("rtpi") for f in frs),
            "goodput_bps": finite_mean(f.metrics["goodput_bps"] for f in frs),
            "jitter_rfc3550_s": finite_mean(f.metrics.get("jitter_rfc3550_s") for f in frs),
            "picture_discard_fraction": _discard_fraction(frs),
            "tcp_retransmissions": sum(int(f.metrics["tcp_retransmissions"] or 0) for f in frs)
            if any(f.metrics["tcp_retransmissions"] is not None for f in frs) else None,
        })
    return out


def _discard_fraction(frs: list[FlowRun]) -> float | None:
    """Share of the video frames discarded at playout, over every repetition (None: not video)."""
    video = [f.metrics["video"] for f in frs if "video" in f.metrics]
    frames = sum(v["frames"] for v in video)
    return sum(v["picture_discards"] for v in video) / frames if frames else None


def _unpooled(frs: list[FlowRun]) -> tuple[dict, int, int, float | None, None]:
    """Delay statistics, packets, received and loss of repetitions known only by their per-run
    metrics: one repetition's own figures; over several, each statistic's mean over the
    repetitions (not the pooled packets' statistic; the report says which cells are so)."""
    stats = [f.metrics["delay"] for f in frs]
    delay = dict(stats[0]) if len(stats) == 1 else {
        k: finite_mean(s.get(k) for s in stats) for k in stats[0] if k not in ("count", "relative_to_min")}
    delay["count"] = sum(int(s.get("count") or 0) for s in stats)
    pk = [f.metrics.get("packets") or {} for f in frs]
    packets = sum(int(p.get("packets", p.get("sent")) or 0) for p in pk)
    received = sum(int(p.get("received") or 0) for p in pk)
    on_wire = sum(int(p.get("packets_on_wire", p.get("packets", p.get("sent"))) or 0) for p in pk)
    return delay, packets, received, ((on_wire - received) / on_wire if on_wire else None), None


def late_at(agg: dict, playout_s: float) -> float | None:
    """The aggregated late fraction at one of :data:`PLOT_PLAYOUT_DELAYS_S`."""
    lf = agg["late"]["late_fraction"]
    if lf is None:
        return None
    i = int(np.argmin(np.abs(np.asarray(agg["late"]["playout_delay_s"]) - playout_s)))
    return lf[i]


def aggregate_cell_cached(cells_out: list[dict], cell: CellData) -> list[dict]:
    """The aggregate of ``cell`` already in ``cells_out`` (the report's per-cell data), else computed."""
    for c in cells_out:
        if c["id"] == cell.id and c["label"] == cell.label:
            return c["flows"]
    return aggregate_cell(cell)
