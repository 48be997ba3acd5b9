"""The report's section on pulled streams (papers/003, docs/video-over-http.md): per cell and
stream, each player measure's mean ± standard deviation over the complete runs (from their
``metrics.json``), and a bar figure of the picture discards, stalls (underflow events) and the
time the picture stood still, per cell — Watanabe et al.'s Fig 4 view.
"""

from __future__ import annotations

from tcpdelay.report.report_context import ReportContext, chunks, part_title
from tcpdelay.report.table_format import mean_std
from tcpdelay.results.runs import read_metrics

__all__ = ["STREAM_MEASURES", "stream_section"]

#: A pulled stream's measures in the report (papers/003: picture discards, underflow events,
#: TCP retransmissions), from each complete run's metrics.json.
STREAM_MEASURES = (("picture_discards", "discards"), ("underflow_events", "underflows"),
                   ("underflow_s", "frozen s"), ("retransmits", "TCP retrans"), ("startup_s", "startup s"))
#: Cells per bar figure.
CELLS_PER_BAR_FIGURE = 40


def stream_section(ctx: ReportContext, report) -> list[dict]:
    """Add the section (nothing when no run has a stream); return its data per cell and stream.
    A run whose metrics.json is missing or not a JSON object is named in a note and left out."""
    from tcpdelay.report import results_plots as rp

    out, rows, unreadable = [], [], []
    for cell in ctx.results.cells:
        per_stream: dict[int, list[dict]] = {}
        for r in ctx.complete(cell):
            if not (r.run_dir / "metrics.json").is_file():
                continue
            doc = read_metrics(r.run_dir)
            if not isinstance(doc, dict):
                unreadable.append(str(r.run_dir / "metrics.json"))
                continue
            for st in doc.get("streams") or []:
                if isinstance(st, dict) and st.get("flow_id") is not None:
                    per_stream.setdefault(int(st["flow_id"]), []).append(st)
        for fid, sts in sorted(per_stream.items()):
            entry = {"cell": cell.id, "label": cell.label, "short_label": ctx.label(cell), "flow_id": fid,
                     "player": sts[0].get("player"), "runs": len(sts)}
            row = [ctx.label(cell), fid, sts[0].get("player") or "", len(sts)]
            for key, _ in STREAM_MEASURES:
                m, sd = mean_std([st.get(key) for st in sts])
                entry[key] = {"mean": m, "std": sd}
                row.append("—" if m is None else f"{m:.3g} ± {sd:.2g}")
            out.append(entry)
            rows.append(row)
    if unreadable:
        report.section("Unreadable files").paragraph(
            "Left out (metrics.json not a JSON object): " + "; ".join(unreadable), note=True)
    if not rows:
        return out
    sec = report.section("Pulled streams (mean ± std over runs)")
    sec.table(["parameters", "stream", "player", "runs", *(h for _, h in STREAM_MEASURES)], rows,
              "Picture discards and underflow events as docs/video-over-http.md reads them (the model "
              "player) or VLC's own counters (frames lost; rebuffering messages); TCP retrans: segments "
              "the server retransmitted; frozen s: time the picture stood still; startup s: from the "
              "first byte to the start of playback.")
    streams = sorted({e["flow_id"] for e in out})
    for fid in streams:
        es = [e for e in out if e["flow_id"] == fid]
        parts = chunks(es, CELLS_PER_BAR_FIGURE)
        for i, part in enumerate(parts):
            base = "Pulled stream" if len(streams) == 1 else f"Pulled stream {fid}"
            panels = [(f"{h} (per run)", [e[k]["mean"] for e in part], [e[k]["std"] for e in part])
                      for k, h in STREAM_MEASURES[:4]]
            sec.figure(rp.bars_figure([e["short_label"] for e in part], panels,
                                      title=part_title(f"{base}: discards and stalls", i, len(parts), "cells part")),
                       "Picture discards, underflow events (stalls), the time the picture stood still and the "
                       "segments the server retransmitted, per "
                       "cell: the mean over the runs, the bar's line their standard deviation.")
    return out
