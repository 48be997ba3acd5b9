"""The report's section on the bottleneck queue (papers/004's average queue length): per cell and
direction, the queue's mean and peak length over the runs (``metrics.json``'s ``queue``), a bar
figure of them, and the queue over time of each cell's first run that kept its ``link_queue``
records (the ns-3 backend writes them; a committed run keeps only the summary).
"""

from __future__ import annotations

from tcpdelay.report.report_context import ReportContext, chunks, part_title
from tcpdelay.report.table_format import mean_std, num
from tcpdelay.results.run_measures import queue_traces

__all__ = ["queue_section"]

#: Cells per bar figure.
CELLS_PER_BAR_FIGURE = 40


def queue_section(ctx: ReportContext, report) -> list[dict]:
    """Add the section (nothing when no run kept a queue trace); return its data per cell and
    direction."""
    from tcpdelay.report import results_plots as rp

    out = []
    for cell in ctx.results.cells:
        per_dir: dict[str, list[dict]] = {}
        for r in ctx.complete(cell):
            for d, q in ctx.measures(r).queue.items():
                per_dir.setdefault(d, []).append(q)
        for d, qs in sorted(per_dir.items()):
            mp, sp = mean_std([q.get("mean_packets") for q in qs])
            mb, _ = mean_std([q.get("mean_bytes") for q in qs])
            peaks = [q.get("max_packets") for q in qs if q.get("max_packets") is not None]
            peak_bytes = [q.get("max_bytes") for q in qs if q.get("max_bytes") is not None]
            out.append({"cell": cell.id, "label": cell.label, "short_label": ctx.label(cell), "direction": d,
                        "runs": len(qs),
                        "mean_packets": mp, "mean_packets_std": sp, "mean_bytes": mb,
                        "max_packets": max(peaks) if peaks else None,
                        "max_bytes": max(peak_bytes) if peak_bytes else None,
                        "samples": sum(int(q.get("samples") or 0) for q in qs)})
    traces = _trace_series(ctx)
    if not out and not traces:
        return out
    sec = report.section("Bottleneck queue")
    busy = [e for e in out if e["max_packets"]]
    if busy:
        sec.table(["parameters", "direction", "runs", "mean packets", "± std", "max packets", "mean bytes",
                   "max bytes"],
                  [[e["short_label"], e["direction"], e["runs"], num(e["mean_packets"], ".3g"),
                    num(e["mean_packets_std"], ".2g"), num(e["max_packets"], "d"), num(e["mean_bytes"], ".4g"),
                    num(e["max_bytes"], "d")] for e in busy],
                  "The queue's length sampled over each run's own window (packets waiting, the one "
                  "being sent not counted): the mean over the runs of each run's average (± their "
                  "standard deviation) and the largest length any run reached. A direction whose queue "
                  "stayed empty in every run is left out.")
    idle = sorted({e["direction"] for e in out} - {e["direction"] for e in busy})
    if idle:
        sec.paragraph(f"The queue stayed empty in every run ({', '.join(idle)}; "
                      f"{sum(e['samples'] for e in out if e['direction'] in idle)} samples).", note=True)
    cells = list(dict.fromkeys(e["cell"] for e in busy))
    dirs = sorted({e["direction"] for e in busy})
    by = {(e["cell"], e["direction"]): e for e in busy}
    labels = {e["cell"]: e["short_label"] for e in busy}
    parts = chunks(cells, CELLS_PER_BAR_FIGURE)
    for i, part in enumerate(parts):
        panels = []
        for d in dirs:
            es = [by.get((c, d)) for c in part]
            panels.append((f"{d}: mean (packets)", [e["mean_packets"] if e else None for e in es],
                           [e["mean_packets_std"] if e else None for e in es]))
            panels.append((f"{d}: max (packets)", [e["max_packets"] if e else None for e in es],
                           [None] * len(es)))
        sec.figure(rp.bars_figure([labels[c] for c in part], panels,
                                  title=part_title("Bottleneck queue length", i, len(parts), "cells part")),
                   "Mean queue length per cell (the mean over the runs, the line their standard deviation) "
                   "and the largest length any run reached.")
    parts = chunks(traces)
    for i, part in enumerate(parts):
        sec.figure(rp.queue_trace_figure(part, title=part_title("Bottleneck queue over time", i, len(parts))),
                   "Queue length over time of each cell's first complete run that kept its queue records, "
                   "per direction that held packets.")
    return out


def _trace_series(ctx: ReportContext) -> list[tuple]:
    series = []
    for cell in ctx.results.cells:
        for r in ctx.complete(cell):
            traces = [t for t in queue_traces(r.run_dir) if t.packets.size and t.packets.max() > 0]
            if traces:
                series.extend((f"{ctx.label(cell)} seed {r.seed} {t.direction}", t.t_s, t.packets) for t in traces)
                break
    return series
