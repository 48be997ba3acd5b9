"""Results of ``tcpdelay run`` / ``tcpdelay sweep`` as tables and plots (``tcpdelay report``).

The data side — reading a results directory (:func:`tcpdelay.results.load_results`) and joining
the repetitions of a cell (:func:`tcpdelay.results.aggregate_cell`) — is :mod:`tcpdelay.results`;
this module only draws and formats. :func:`build_report` adds the tables and figures to a
:class:`tcpdelay.report.html.Report` and returns the same figures as plain data (the JSON of
``tcpdelay report --json``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.report.report_context import CURVES_PER_FIGURE, ReportContext, chunks, part_title
from tcpdelay.report.table_format import kbps, ms, num, pct
from tcpdelay.results import (QUALITY_BIN_S, CellData, Results, aggregate_cell,
                              aggregate_cell_cached, finite_mean, late_at, load_results)
from tcpdelay.results.testbed_error import LATE_MARK, LATE_NOTE, warning_line, worst

__all__ = ["CURVES_PER_FIGURE", "TABLE_PLAYOUT_DELAYS_S", "build_report", "cell_label", "write_report"]

#: Playout delays (s) whose late fraction the tables show (all of them go into the JSON and plots).
TABLE_PLAYOUT_DELAYS_S = (0.1, 0.2, 0.4)


def cell_label(cell: CellData, results: Results | None = None) -> str:
    """A cell's label in the report: its short label among ``results``' cells (the parameters
    that differ between them), the scenario's name for a cell without parameters."""
    if results is not None:
        return ReportContext.of(results).label(cell)
    return cell.label if cell.overrides else "-"


def build_report(results: Results, report) -> dict:
    """Add the results' sections to ``report`` (a :class:`tcpdelay.report.html.Report`) and
    return the data (``tcpdelay report --json``): a section for each kind of thing the runs
    measured — media flows, transfers, pulled streams, cross traffic, the bottleneck queue, TCP
    state — and only for those."""
    from tcpdelay.report.cross_section import cross_section
    from tcpdelay.report.queue_section import queue_section
    from tcpdelay.report.shown_metrics import shown_metrics
    from tcpdelay.report.stream_section import stream_section
    from tcpdelay.report.tcp_section import tcp_section
    from tcpdelay.report.transfer_section import transfer_section

    ctx = ReportContext.of(results)
    shown = shown_metrics(results.path)
    runs = [r for c in results.cells for r in c.runs]
    counts = {s: sum(r.status == s for r in runs) for s in ("complete", "failed", "incomplete")}
    overview = report.section("Overview")
    overview.paragraph(
        f"Results of {results.name!r} in {results.path} ({'a sweep' if results.kind == 'sweep' else 'a run'}): "
        f"{len(results.cells)} cell(s), {len(runs)} run(s) — {counts['complete']} complete, "
        f"{counts['failed']} failed, {counts['incomplete']} incomplete (interrupted or still running; "
        "left out).")
    sources = {k: sum(r.status == "complete" and r.packets == k for r in runs) for k in ("records", "delays", "none")}
    if counts["failed"]:
        overview.paragraph("Failed runs: " + "; ".join(
            f"{r.run_dir}: {r.error}" for r in runs if r.status == "failed"), note=True)
    before = len(report.figures())
    has_media = any(r.flows for r in runs if r.status == "complete")
    cells_out = _media_tables(ctx, report, shown, sources) if has_media else _cells_without_media(ctx)
    if has_media:
        _media_figures(ctx, report, shown, cells_out)
    transfers = transfer_section(ctx, report)
    streams_out = stream_section(ctx, report)
    cross = cross_section(ctx, report)
    queue = queue_section(ctx, report)
    tcp = tcp_section(ctx, report)
    measured = [k for k, present in (("media", has_media), ("transfers", transfers), ("streams", streams_out),
                                     ("cross_traffic", cross), ("queue", queue),
                                     ("tcp_state", tcp["state"] or tcp["end"])) if present]
    names = {"media": "media flows", "transfers": "timed transfers", "streams": "pulled streams",
             "cross_traffic": "cross traffic", "queue": "the bottleneck queue", "tcp_state": "the senders' TCP state"}
    overview.paragraph(
        ("What the runs measured: " + ", ".join(names[k] for k in measured) + " (a section for each below). "
         if measured else "No complete run measured anything this report can show. ")
        + (f"Media flow tables and figures show the scenario's `metrics`: {', '.join(shown)} "
           "(`tcpdelay metrics RUN_DIR` gives every metric of a run). " if has_media else ""))
    if ctx.problems():
        overview.paragraph("Left out, unreadable: " + "; ".join(ctx.problems()), note=True)
    verdicts = [r.testbed for r in runs if r.testbed is not None]
    late = warning_line("report", verdicts)
    if late:
        text = late.split(": warning: ", 1)[1]
        overview.paragraph(text[0].upper() + text[1:], note=True)
    plots = report.figures()[before:]
    return {"results": str(results.path), "kind": results.kind, "name": results.name,
            "metrics": list(shown), "measured": measured, "runs": counts, "packets": sources,
            "table_playout_delays_s": list(TABLE_PLAYOUT_DELAYS_S), "cells": cells_out,
            **({"streams": streams_out} if streams_out else {}),
            "transfers": transfers, "cross_traffic": cross, "queue": queue, "tcp": tcp,
            "figures": len(plots), "plots": plots,
            "testbed_error": {"late_cells": sorted(late_cells(results)),
                              "worst": None if not verdicts else worst(verdicts).to_dict(),
                              "runs_recorded": sum(v.recorded for v in verdicts)}}


def _cells_without_media(ctx: ReportContext) -> list[dict]:
    return [{"id": cell.id, "label": cell.label, "short_label": ctx.label(cell), "overrides": cell.overrides,
             "runs": [_run_out(r) for r in cell.runs], "testbed_late": cell.id in late_cells(ctx.results),
             "flows": [], "jain_index_goodput": None} for cell in ctx.results.cells]


def _media_tables(ctx: ReportContext, report, shown: tuple[str, ...], sources: dict) -> list[dict]:
    """The media flows' per-cell tables (delay and loss; the other measures) and per-run table."""
    sec = report.section("Media flows: per cell (repetitions joined)" if ctx.results.kind == "sweep"
                         else "Media flows: summary (repetitions joined)")
    sec.paragraph(
        "Delays are one-way, from the sender's write to the receiver's read, on one clock. Per cell, the "
        "delay statistics and late fractions are over the pooled packets of every repetition; MOS, "
        "acceptable quality, RTPI, goodput and Jain's index are means over the repetitions.")
    if sources["delays"] or sources["none"]:
        sec.paragraph(
            f"Per-packet data: {sources['records']} complete run(s) with their packet records (metrics "
            f"recomputed from them), {sources['delays']} with only their packets' delays and "
            f"{sources['none']} with none (measured before runs kept packets.parquet; their records "
            "were never kept): their per-run figures are those of their metrics.json. A cell with a "
            "repetition without per-packet delays shows the mean of the per-run statistics, not the "
            "statistics of the pooled packets, and has no delay plots.", note=True)
    cells_out, aggs_of = [], {}
    late = late_cells(ctx.results)

    def label(cell) -> str:       # a cell whose testbed was late in a run is marked
        return ctx.label(cell) + (LATE_MARK if cell.id in late else "")
    for cell in ctx.results.cells:
        aggs = aggregate_cell(cell)
        jain = finite_mean(r.jain_index for r in cell.runs if r.status == "complete")
        aggs_of[cell.id] = (aggs, jain)
        cells_out.append({
            "id": cell.id, "label": cell.label, "short_label": ctx.label(cell), "overrides": cell.overrides,
            "runs": [_run_out(r) for r in cell.runs], "testbed_late": cell.id in late,
            "flows": aggs, "jain_index_goodput": jain,
        })
    # two tables of at most a dozen columns, so that each fits the page (one when either is empty)
    tables = [(_shown_columns(_CELL_DELAY_COLUMNS, shown),
               "Late: share of the packets sent that arrive after a fixed playout delay (from the send time)."),
              (_shown_columns(_CELL_OTHER_COLUMNS, shown),
               "MOS: E-model at the best of the metrics' playout delays; acceptable: share of packets at "
               "quality levels 0–1 (voice flows); discards: video frames discarded at playout; goodput "
               "and Jain's index: means over the runs.")]
    for cols, caption in [t for t in tables if t[0]] or tables[:1]:
        rows = [[label(cell), a["name"], a["runs"], a["packets"], *(fn(a, jain) for _, fn in cols)]
                for cell in ctx.results.cells for aggs, jain in [aggs_of[cell.id]] for a in aggs]
        sec.table(["parameters", "flow", "runs", "packets", *(h for h, _ in cols)], rows,
                  caption + (f" {LATE_NOTE}" if late else ""))
    run_cols = _shown_columns(_RUN_COLUMNS, shown)
    run_rows = []
    for cell in ctx.results.cells:
        for r in cell.runs:
            if r.status != "complete":
                run_rows.append([label(cell), r.seed, r.status, "", *("" for _ in run_cols), r.error or ""])
                continue
            for f in r.flows:
                run_rows.append([label(cell), r.seed, r.status, f.name,
                                 *(run_fn(f.metrics) for _, run_fn in run_cols), ""])
    report.section("Media flows: per run").table(
        ["parameters", "seed", "status", "flow", *(h for h, _ in run_cols), "error"], run_rows,
        LATE_NOTE if late else "")
    return cells_out


def late_cells(results: Results) -> set[str]:
    """The ids of the cells with a complete run whose testbed was itself late."""
    return {c.id for c in results.cells if any(r.testbed is not None and r.testbed.late for r in c.runs)}


def _run_out(r) -> dict:
    """A run in the report's JSON: where, how it ended, and its testbed error's verdict."""
    return {"seed": r.seed, "status": r.status, "run_dir": str(r.run_dir), "error": r.error, "wall_s": r.wall_s,
            "packets": r.packets,
            "testbed_error": None if r.testbed is None else {**r.testbed.to_dict(), "section": r.testbed_section}}


def _media_figures(ctx: ReportContext, report, shown: tuple[str, ...], cells_out: list[dict]) -> int:
    """Delay CDF, late fraction and quality over time of every media flow; each figure's title
    says which flow, and which part of the cells when they take several figures."""
    from tcpdelay.report import results_plots as rp

    results = ctx.results
    sec = report.section("Media flow figures")
    figures = 0
    names = sorted({(f.flow_id, f.name) for c in results.cells for r in c.runs for f in r.flows})

    def delays(fid: int) -> list:
        """Per cell with pooled delays of flow ``fid``: (cell label, delays, aggregate)."""
        series = []
        for cell in results.cells:
            agg = next((a for a in aggregate_cell_cached(cells_out, cell) if a["flow_id"] == fid), None)
            ds = [f.delay_s for r in cell.runs if r.status == "complete" for f in r.flows
                  if f.flow_id == fid and f.delay_s is not None]
            if agg and ds and agg["pooled"]:
                series.append((ctx.label(cell), np.concatenate(ds), agg))
        return series

    def quality(fid: int) -> list:
        """Per cell, its first complete run's quality over time of flow ``fid``."""
        q = []
        for cell in results.cells:
            first = next((r for r in cell.runs if r.status == "complete"), None)
            fr = next((f for f in first.flows if f.flow_id == fid), None) if first else None
            ot = (fr.metrics.get("quality") or {}).get("over_time") if fr else None
            if ot is not None and len(ot["bin_start_s"]):
                q.append((f"{ctx.label(cell)} seed {first.seed}", np.asarray(ot["bin_start_s"]),
                          np.asarray(ot["mean_level"]), np.asarray(ot["worst_level"])))
        return q

    if len(results.cells) == 1 and len(names) > 1:
        # one cell: a curve per flow, named by the flow (a figure per flow drew one curve each,
        # named by the cell: 26 figures for a 13-flow run)
        groups = [("every flow", "flows part", "one curve per flow",
                   [(name, d, a) for fid, name in names for _, d, a in delays(fid)],
                   [(f"{name}{lbl[lbl.index(' seed '):]}", *rest) for fid, name in names
                    for lbl, *rest in quality(fid)])]
    else:
        groups = [(f"flow {name}", "cells part", "one curve per cell", delays(fid), quality(fid))
                  for fid, name in names]
    for what, part, curves, series, q in groups:
        parts = chunks(series, CURVES_PER_FIGURE)
        for i, chunk in enumerate(parts):
            if "delay" in shown:
                sec.figure(rp.delay_cdf_figure([(lbl, d) for lbl, d, _ in chunk],
                                               title=part_title(f"Delay CDF, {what}", i, len(parts), part)),
                           f"Delay CDF of {what} (pooled repetitions), {curves}.")
                figures += 1
            if "late" in shown:
                sec.figure(rp.late_fraction_figure(
                    [(lbl, a["late"]["playout_delay_s"], a["late"]["late_fraction"]) for lbl, _, a in chunk],
                    title=part_title(f"Late fraction, {what}", i, len(parts), part)),
                    f"Late fraction of {what} against the playout delay (Brosh et al. Fig 23 style), {curves}.")
                figures += 1
        if "quality" not in shown:
            continue
        parts = chunks(q, 6)
        for i, chunk in enumerate(parts):
            sec.figure(rp.quality_over_time_figure(
                chunk, bin_s=QUALITY_BIN_S, title=part_title(f"Quality level, {what}", i, len(parts), part)),
                f"Quality level over time of {what} (first complete repetition of each cell; "
                f"levels of the loss periods, 0 best, 5 worst; mean and worst per {QUALITY_BIN_S:g} s).")
            figures += 1
    figures += _per_cell_bars(ctx, sec, shown, cells_out)
    if not figures:
        sec.paragraph("No complete run with per-packet delays: nothing to plot." if "delay" in shown or
                      "late" in shown else f"No figure of the metrics shown ({', '.join(shown)}).", note=True)
    return figures


#: The per-cell bar figure's panels: (metric, axis label, value of an aggregated flow, scale).
_BAR_PANELS = [("loss", "loss (%)", "loss_rate", 100.0), ("jitter", "jitter (ms)", "jitter_rfc3550_s", 1e3),
               ("mos", "MOS", "mos", 1.0), ("rtpi", "RTPI", "rtpi", 1.0),
               ("goodput", "goodput (kb/s)", "goodput_bps", 1e-3), ("tcp", "TCP retrans", "tcp_retransmissions", 1.0)]
#: Cells per bar figure.
CELLS_PER_BAR_FIGURE = 40


def _per_cell_bars(ctx: ReportContext, sec, shown: tuple[str, ...], cells_out: list[dict]) -> int:
    """One bar per cell of each scalar metric shown (the mean over the cell's media flows, the
    line their standard deviation; Jain's index per cell); the number of figures drawn."""
    from tcpdelay.report import results_plots as rp
    from tcpdelay.report.table_format import mean_std

    metrics = [p for p in _BAR_PANELS if p[0] in shown]
    cells = [c for c in cells_out if c["flows"]]
    if not cells or not (metrics or "fairness" in shown):
        return 0
    parts = chunks(cells, CELLS_PER_BAR_FIGURE)
    for i, part in enumerate(parts):
        panels = []
        for _, axis, key, scale in metrics:
            stats = [mean_std([None if f.get(key) is None else f[key] * scale for f in c["flows"]]) for c in part]
            panels.append((axis, [m for m, _ in stats], [sd for _, sd in stats]))
        if "fairness" in shown:
            panels.append(("Jain's index (goodput)", [c["jain_index_goodput"] for c in part], [None] * len(part)))
        panels = [p for p in panels if any(v is not None for v in p[1])]
        if not panels:
            return i
        sec.figure(rp.bars_figure([c["short_label"] for c in part], panels,
                                  title=part_title("Media flows per cell", i, len(parts), "cells part")),
                   "Per cell, each metric shown: the mean over the cell's media flows (each flow's value "
                   "over the runs as in the table), the bar's line their standard deviation.")
    return len(parts)


#: Columns of the per-cell delay table after parameters, flow, runs and packets: (metric, header,
#: value of an aggregated flow and the cell's Jain index), in the order shown.
_CELL_DELAY_COLUMNS: list[tuple[str, str, Callable[[dict, float | None], object]]] = [
    ("loss", "loss %", lambda a, j: pct(a["loss_rate"])),
    ("delay", "mean ms", lambda a, j: ms(a["delay"]["mean_s"])),
    ("delay", "std ms", lambda a, j: ms(a["delay"]["std_s"])),
    ("delay", "p95 ms", lambda a, j: ms(a["delay"].get("p95_s"))),
    ("delay", "p99 ms", lambda a, j: ms(a["delay"].get("p99_s"))),
    ("delay", "max ms", lambda a, j: ms(a["delay"]["max_s"])),
    *(("late", f"late % @{x * 1e3:g} ms", lambda a, j, x=x: pct(late_at(a, x))) for x in TABLE_PLAYOUT_DELAYS_S),
]
#: The per-cell table of the other measures.
_CELL_OTHER_COLUMNS: list[tuple[str, str, Callable[[dict, float | None], object]]] = [
    ("jitter", "jitter ms", lambda a, j: ms(a["jitter_rfc3550_s"])),
    ("mos", "MOS", lambda a, j: num(a["mos"], ".2f")),
    ("quality", "acceptable %", lambda a, j: pct(a["acceptable_quality_fraction"], 1)),
    ("rtpi", "RTPI", lambda a, j: num(a["rtpi"], ".3f")),
    ("goodput", "goodput kb/s", lambda a, j: kbps(a["goodput_bps"])),
    ("playout", "discards %", lambda a, j: pct(a["picture_discard_fraction"])),
    ("tcp", "TCP retrans", lambda a, j: "—" if a["tcp_retransmissions"] is None else a["tcp_retransmissions"]),
    ("fairness", "Jain", lambda a, j: num(j, ".3f")),
]

#: Columns of the per-run table after parameters, seed, status and flow: (metric, header, value
#: of the run's flow metrics).
_RUN_COLUMNS: list[tuple[str, str, Callable[[dict], object]]] = [
    ("loss", "loss %", lambda m: pct(m["packets"]["loss_rate"])),
    ("delay", "mean ms", lambda m: ms(m["delay"]["mean_s"])),
    ("delay", "std ms", lambda m: ms(m["delay"]["std_s"])),
    ("delay", "p95 ms", lambda m: ms(m["delay"].get("p95_s"))),
    ("jitter", "jitter ms", lambda m: ms(m.get("jitter_rfc3550_s"))),
    ("mos", "MOS", lambda m: num(m.get("emodel", {}).get("best", {}).get("mos"), ".2f")),
    ("goodput", "goodput kb/s", lambda m: kbps(m["goodput_bps"])),
]


def _shown_columns(columns: list, shown: tuple[str, ...]) -> list[tuple[str, Callable]]:
    return [(header, fn) for metric, header, fn in columns if metric in shown]


def write_report(path: str | os.PathLike, out: str | os.PathLike | None = None,
                 progress: Callable[[int, int], None] | None = None) -> dict:
    """Load ``path``, build its report and write it to ``out`` (default ``path/report.html``);
    ``progress`` as in :func:`load_results`."""
    from tcpdelay.report.html import Report

    results = load_results(path, progress=progress)
    report = Report(f"tcpdelay results: {results.name}")
    data = build_report(results, report)
    target = Path(out) if out is not None else results.path / "report.html"
    if target.exists() and target.is_dir():
        raise ParameterError(f"--out: {str(target)!r} is a directory; give a file name")
    try:
        data["report_path"] = str(report.write(target))
    except OSError as err:
        raise ParameterError(f"--out: cannot write {str(target)!r}: {err.strerror or err}") from None
    return data
