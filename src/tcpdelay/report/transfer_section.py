"""The report's section on timed transfers (Cardwell et al., ``kind = "transfers"`` cross
traffic): per cell, the transfers of every complete run pooled — how many completed, their
handshake, transfer and total times (:func:`tcpdelay.metrics.transfers.transfer_summary`) — and
the distribution of the handshake and transfer times, one curve per cell (with many cells,
bars of their means and 95th percentiles instead).
"""

from __future__ import annotations

import numpy as np

from tcpdelay.metrics.transfers import transfer_summary
from tcpdelay.report.report_context import ReportContext, chunks, part_title
from tcpdelay.report.table_format import ms, num

__all__ = ["transfer_section"]

#: Up to this many cells, one distribution curve per cell; more get bars per cell.
MAX_CELLS_FOR_DISTRIBUTIONS = 20
#: Cells per bar figure.
CELLS_PER_BAR_FIGURE = 40


def transfer_section(ctx: ReportContext, report) -> list[dict]:
    """Add the section (nothing when no run made transfers); return its data per cell."""
    from tcpdelay.report import results_plots as rp

    out, rows, handshakes, transfers = [], [], [], []
    for cell in ctx.results.cells:
        runs = [r for r in ctx.complete(cell) if ctx.measures(r).transfers]
        if not runs:
            continue
        flows = [f for r in runs for f in ctx.measures(r).transfers]
        pooled = [t for f in flows for t in f.rows]
        s = transfer_summary(pooled)
        label = ctx.label(cell)
        out.append({"cell": cell.id, "label": cell.label, "short_label": label, "runs": len(runs),
                    "flows": len(flows), **s})
        per_transfer = (lambda n: "—" if n is None or not s["transfers"] else f"{n / s['transfers']:.2f}")
        rows.append([label, len(runs), f"{s['complete']} / {s['transfers']}",
                     ms(s["handshake_s"]["mean_s"]), ms(s["handshake_s"].get("p95_s")),
                     ms(s["transfer_s"]["mean_s"]), ms(s["transfer_s"].get("p50_s")),
                     ms(s["transfer_s"].get("p95_s")), ms(s["latency_s"]["mean_s"]),
                     per_transfer(s["retransmits"]), per_transfer(s["rtos"]), num(s["syn_retransmits"], "d")])
        done = [t for t in pooled if t.get("complete")]
        handshakes.append((label, np.array([np.nan if t.get("handshake_s") is None else t["handshake_s"]
                                            for t in done], float)))
        transfers.append((label, np.array([np.nan if t.get("transfer_s") is None else t["transfer_s"]
                                           for t in done], float)))
    if not out:
        return out
    sec = report.section("Transfers (every run's transfers pooled per cell)")
    sec.table(["parameters", "runs", "complete / made", "handshake mean ms", "handshake p95 ms",
               "transfer mean ms", "transfer p50 ms", "transfer p95 ms", "total mean ms",
               "retrans / transfer", "RTOs / transfer", "SYN retrans"], rows,
              "Handshake: connect() to established (L_h); transfer: the first write to the "
              "acknowledgement of the last byte; total: both. Over the completed transfers of every "
              "complete run of the cell. Retransmissions and RTOs per transfer made; SYN retrans: SYNs "
              "sent again, in all.")
    if len(out) > MAX_CELLS_FOR_DISTRIBUTIONS:  # too many curves to read: bars per cell instead
        parts = chunks(out, CELLS_PER_BAR_FIGURE)
        for i, part in enumerate(parts):
            panels = [(axis, [e[key][stat] * 1e3 if e[key][stat] is not None else None for e in part],
                       [None] * len(part))
                      for axis, key, stat in (("handshake mean (ms)", "handshake_s", "mean_s"),
                                              ("transfer mean (ms)", "transfer_s", "mean_s"),
                                              ("transfer p95 (ms)", "transfer_s", "p95_s"))]
            sec.figure(rp.bars_figure([e["short_label"] for e in part], panels,
                                      title=part_title("Transfers per cell", i, len(parts), "cells part")),
                       f"Mean handshake time and the mean and 95th percentile of the transfer time per cell "
                       f"(more than {MAX_CELLS_FOR_DISTRIBUTIONS} cells: bars instead of one distribution "
                       "per cell; the JSON has every statistic).")
        return out
    for name, series, xlabel in (("handshake time", handshakes, "handshake time (ms, log)"),
                                 ("transfer time", transfers, "transfer time (ms, log)")):
        series = [(lbl, x) for lbl, x in series if np.isfinite(x).any()]
        parts = chunks(series)
        for i, part in enumerate(parts):
            title = part_title(f"Transfers: {name}", i, len(parts), "cells part")
            sec.figure(rp.times_cdf_figure(part, xlabel=xlabel, title=title),
                       f"Distribution of the {name} of the completed transfers, one curve per cell "
                       "(every run of the cell pooled; n: transfers).")
    return out
