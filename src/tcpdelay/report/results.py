"""Results of ``tcpdelay run`` / ``tcpdelay sweep`` as tables and plots (``tcpdelay report``).

The data side — reading a results directory (:func:`tcpdelay.results.load_results`) and joining
the repetitions of a cell (:func:`tcpdelay.results.aggregate_cell`) — is :mod:`tcpdelay.results`;
this module only draws and formats. :func:`build_report` adds the tables and figures to a
:class:`tcpdelay.report.html.Report` and returns the same figures as plain data (the JSON of
``tcpdelay report --json``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Callable

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.results import (QUALITY_BIN_S, CellData, Results, aggregate_cell,
                              aggregate_cell_cached, finite_mean, late_at, load_results)

__all__ = ["CURVES_PER_FIGURE", "TABLE_PLAYOUT_DELAYS_S", "build_report", "cell_label", "write_report"]

#: Playout delays (s) whose late fraction the tables show (all of them go into the JSON and plots).
TABLE_PLAYOUT_DELAYS_S = (0.1, 0.2, 0.4)
#: Connections per TCP-state figure (a run with more is drawn in several figures).
TCP_STATE_CURVES_PER_FIGURE = 10
#: Curves per figure (more cells are drawn in several figures).
CURVES_PER_FIGURE = 10


def _ms(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x * 1e3:.1f}"


def _pct(x: float | None, digits: int = 2) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x * 100:.{digits}f}"


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "—" if x is None or not math.isfinite(x) else format(x, fmt)


def _kbps(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x / 1e3:.1f}"


def cell_label(cell: CellData) -> str:
    return cell.label if cell.overrides else "-"


def build_report(results: Results, report) -> dict:
    """Add the results' sections to ``report`` (a :class:`tcpdelay.report.html.Report`) and
    return the data (``tcpdelay report --json``)."""
    from tcpdelay.report import results_plots as rp
    from tcpdelay.report.shown_metrics import shown_metrics

    shown = shown_metrics(results.path)
    runs = [r for c in results.cells for r in c.runs]
    counts = {s: sum(r.status == s for r in runs) for s in ("complete", "failed", "incomplete")}
    sec = report.section("Overview")
    sec.paragraph(
        f"Results of {results.name!r} in {results.path} ({'a sweep' if results.kind == 'sweep' else 'a run'}): "
        f"{len(results.cells)} cell(s), {len(runs)} run(s) — {counts['complete']} complete, "
        f"{counts['failed']} failed, {counts['incomplete']} incomplete (interrupted or still running; "
        "left out). Delays are one-way, from the sender's write to the receiver's read, on one clock. "
        "Per cell, the delay statistics and late fractions are over the pooled packets of every "
        "repetition; MOS, acceptable quality, RTPI, goodput and Jain's index are means over the repetitions. "
        f"Shown: {', '.join(shown)} (the scenario's `metrics`; `tcpdelay metrics RUN_DIR` gives every "
        "metric of a run).")
    sources = {k: sum(r.status == "complete" and r.packets == k for r in runs) for k in ("records", "delays", "none")}
    if sources["delays"] or sources["none"]:
        sec.paragraph(
            f"Per-packet data: {sources['records']} complete run(s) with their packet records (metrics "
            f"recomputed from them), {sources['delays']} with only their packets' delays and "
            f"{sources['none']} with none (measured before runs kept packets.parquet; their records "
            "were never kept): their per-run figures are those of their metrics.json. A cell with a "
            "repetition without per-packet delays shows the mean of the per-run statistics, not the "
            "statistics of the pooled packets, and has no delay plots.", note=True)
    if counts["failed"]:
        sec.paragraph("Failed runs: " + "; ".join(
            f"{r.run_dir}: {r.error}" for r in runs if r.status == "failed"), note=True)

    cell_cols = _shown_columns(_CELL_COLUMNS, shown)
    cells_out = []
    cell_rows = []
    for cell in results.cells:
        aggs = aggregate_cell(cell)
        jain = finite_mean(r.jain_index for r in cell.runs if r.status == "complete")
        cells_out.append({
            "id": cell.id, "label": cell.label, "overrides": cell.overrides,
            "runs": [{"seed": r.seed, "status": r.status, "run_dir": str(r.run_dir), "error": r.error,
                      "wall_s": r.wall_s, "packets": r.packets} for r in cell.runs],
            "flows": aggs, "jain_index_goodput": jain,
        })
        for a in aggs:
            cell_rows.append([cell_label(cell), a["name"], a["runs"], a["packets"],
                              *(cell_fn(a, jain) for _, cell_fn in cell_cols)])
    sec = report.section("Per cell (repetitions joined)" if results.kind == "sweep" else "Summary (repetitions joined)")
    sec.table(["parameters", "flow", "runs", "packets", *(h for h, _ in cell_cols)], cell_rows,
              "Late: share of the packets sent that arrive after a fixed playout delay (from the send "
              "time); MOS: E-model at the best of the metrics' playout delays; acceptable: share of "
              "packets at quality levels 0–1 (voice flows); discards: video frames discarded at playout.")

    run_cols = _shown_columns(_RUN_COLUMNS, shown)
    run_rows = []
    for cell in results.cells:
        for r in cell.runs:
            if r.status != "complete":
                run_rows.append([cell_label(cell), r.seed, r.status, "", *("" for _ in run_cols), r.error or ""])
                continue
            for f in r.flows:
                run_rows.append([cell_label(cell), r.seed, r.status, f.name,
                                 *(run_fn(f.metrics) for _, run_fn in run_cols), ""])
    report.section("Per run").table(
        ["parameters", "seed", "status", "flow", *(h for h, _ in run_cols), "error"], run_rows)

    streams_out = _streams_section(results, report)

    sec = report.section("Figures")
    figures = 0
    names = sorted({(f.flow_id, f.name) for c in results.cells for r in c.runs for f in r.flows})
    for fid, name in names:
        series = []
        for cell in results.cells:
            agg = next((a for a in aggregate_cell_cached(cells_out, cell) if a["flow_id"] == fid), None)
            ds = [f.delay_s for r in cell.runs if r.status == "complete" for f in r.flows
                  if f.flow_id == fid and f.delay_s is not None]
            if agg and ds and agg["pooled"]:
                series.append((cell_label(cell), np.concatenate(ds), agg))
        for chunk in _chunks(series, CURVES_PER_FIGURE):
            if "delay" in shown:
                sec.figure(rp.delay_cdf_figure([(lbl, d) for lbl, d, _ in chunk], title=f"flow {name}"),
                           f"Delay CDF of flow {name!r} (pooled repetitions), one curve per cell.")
                figures += 1
            if "late" in shown:
                sec.figure(rp.late_fraction_figure([(lbl, a["late"]["playout_delay_s"], a["late"]["late_fraction"])
                                                    for lbl, _, a in chunk], title=f"flow {name}"),
                           f"Late fraction of flow {name!r} against the playout delay (Brosh et al. Fig 23 style).")
                figures += 1
        if "quality" not in shown:
            continue
        q = []
        for cell in results.cells:
            first = next((r for r in cell.runs if r.status == "complete"), None)
            fr = next((f for f in first.flows if f.flow_id == fid), None) if first else None
            ot = (fr.metrics.get("quality") or {}).get("over_time") if fr else None
            if ot is not None and len(ot["bin_start_s"]):
                q.append((f"{cell_label(cell)} seed {first.seed}", np.asarray(ot["bin_start_s"]),
                          np.asarray(ot["mean_level"]), np.asarray(ot["worst_level"])))
        for chunk in _chunks(q, 6):
            sec.figure(rp.quality_over_time_figure(chunk, bin_s=QUALITY_BIN_S, title=f"flow {name}"),
                       f"Quality level over time of flow {name!r} (first complete repetition of each cell; "
                       f"levels of the loss periods, 0 best, 5 worst; mean and worst per {QUALITY_BIN_S:g} s).")
            figures += 1
    figures += _tcp_state_figures(results, sec)
    if not figures:
        sec.paragraph("No complete run with media records: nothing to plot." if names else
                      f"No figure of the metrics shown ({', '.join(shown)}).", note=True)
    return {"results": str(results.path), "kind": results.kind, "name": results.name,
            "metrics": list(shown), "runs": counts, "packets": sources,
            "table_playout_delays_s": list(TABLE_PLAYOUT_DELAYS_S), "cells": cells_out,
            **({"streams": streams_out} if streams_out else {}), "figures": figures}


#: Columns of the per-cell table after parameters, flow, runs and packets: (metric, header,
#: value of an aggregated flow and the cell's Jain index), in the order shown.
_CELL_COLUMNS: list[tuple[str, str, Callable[[dict, float | None], object]]] = [
    ("loss", "loss %", lambda a, j: _pct(a["loss_rate"])),
    ("delay", "mean ms", lambda a, j: _ms(a["delay"]["mean_s"])),
    ("delay", "std ms", lambda a, j: _ms(a["delay"]["std_s"])),
    ("delay", "p95 ms", lambda a, j: _ms(a["delay"].get("p95_s"))),
    ("delay", "p99 ms", lambda a, j: _ms(a["delay"].get("p99_s"))),
    ("delay", "max ms", lambda a, j: _ms(a["delay"]["max_s"])),
    *(("late", f"late % @{x * 1e3:g} ms", lambda a, j, x=x: _pct(late_at(a, x))) for x in TABLE_PLAYOUT_DELAYS_S),
    ("jitter", "jitter ms", lambda a, j: _ms(a["jitter_rfc3550_s"])),
    ("mos", "MOS", lambda a, j: _num(a["mos"], ".2f")),
    ("quality", "acceptable %", lambda a, j: _pct(a["acceptable_quality_fraction"], 1)),
    ("rtpi", "RTPI", lambda a, j: _num(a["rtpi"], ".3f")),
    ("goodput", "goodput kb/s", lambda a, j: _kbps(a["goodput_bps"])),
    ("playout", "discards %", lambda a, j: _pct(a["picture_discard_fraction"])),
    ("tcp", "TCP retrans", lambda a, j: "—" if a["tcp_retransmissions"] is None else a["tcp_retransmissions"]),
    ("fairness", "Jain", lambda a, j: _num(j, ".3f")),
]

#: Columns of the per-run table after parameters, seed, status and flow: (metric, header, value
#: of the run's flow metrics).
_RUN_COLUMNS: list[tuple[str, str, Callable[[dict], object]]] = [
    ("loss", "loss %", lambda m: _pct(m["packets"]["loss_rate"])),
    ("delay", "mean ms", lambda m: _ms(m["delay"]["mean_s"])),
    ("delay", "std ms", lambda m: _ms(m["delay"]["std_s"])),
    ("delay", "p95 ms", lambda m: _ms(m["delay"].get("p95_s"))),
    ("jitter", "jitter ms", lambda m: _ms(m.get("jitter_rfc3550_s"))),
    ("mos", "MOS", lambda m: _num(m.get("emodel", {}).get("best", {}).get("mos"), ".2f")),
    ("goodput", "goodput kb/s", lambda m: _kbps(m["goodput_bps"])),
]


#: A pulled stream's measures in the report (papers/003: picture discards, underflow events,
#: TCP retransmissions), from each complete run's metrics.json.
_STREAM_MEASURES = (("picture_discards", "discards"), ("underflow_events", "underflows"),
                    ("underflow_s", "frozen s"), ("retransmits", "TCP retrans"), ("startup_s", "startup s"))


def _mean_std(xs: list) -> tuple[float | None, float | None]:
    xs = [float(x) for x in xs if x is not None]
    if not xs:
        return None, None
    return float(np.mean(xs)), float(np.std(xs, ddof=1)) if len(xs) > 1 else 0.0


def _streams_section(results: Results, report) -> list[dict]:
    """Per cell and pulled stream (docs/video-over-http.md): each measure's mean ± standard
    deviation over the complete runs. Nothing when no run has a stream."""
    import json

    out, rows = [], []
    for cell in results.cells:
        per_stream: dict[int, list[dict]] = {}
        for r in cell.runs:
            path = r.run_dir / "metrics.json"
            if r.status != "complete" or not path.is_file():
                continue
            for st in json.loads(path.read_text()).get("streams", []):
                per_stream.setdefault(int(st["flow_id"]), []).append(st)
        for fid, sts in sorted(per_stream.items()):
            entry = {"cell": cell.id, "label": cell.label, "flow_id": fid, "player": sts[0].get("player"),
                     "runs": len(sts)}
            row = [cell_label(cell), fid, sts[0].get("player") or "", len(sts)]
            for key, _ in _STREAM_MEASURES:
                m, sd = _mean_std([st.get(key) for st in sts])
                entry[key] = {"mean": m, "std": sd}
                row.append("—" if m is None else f"{m:.3g} ± {sd:.2g}")
            out.append(entry)
            rows.append(row)
    if rows:
        report.section("Pulled streams (mean ± std over runs)").table(
            ["parameters", "stream", "player", "runs", *(h for _, h in _STREAM_MEASURES)], rows,
            "Picture discards and underflow events as docs/video-over-http.md reads them (the model "
            "player) or VLC's own counters (frames lost; rebuffering messages); TCP retrans: segments "
            "the server retransmitted; frozen s: time the picture stood still; startup s: from the "
            "first byte to the start of playback.")
    return out


def _tcp_state_figures(results: Results, sec) -> int:
    """TCP state over time of each cell's first complete run that has ``tcp_state`` records
    (a run measured before the sampler has none, and gets no figure). Returns how many."""
    from tcpdelay.report import results_plots as rp
    from tcpdelay.results.tcp_state import tcp_state_series

    figures = 0
    for cell in results.cells:
        for r in cell.runs:
            if r.status != "complete":
                continue
            series = tcp_state_series(r.run_dir)
            if not series:
                continue
            names = {f.flow_id: f.name for f in r.flows}
            multi = {s.flow_id for s in series if s.connection != 0}
            curves = [(f"{names.get(s.flow_id, f'flow {s.flow_id}')}"
                       + (f" conn {s.connection}" if s.flow_id in multi else ""),
                       s.t_s, s.cwnd_segments, s.srtt_s, s.delivery_rate_bps) for s in series]
            for chunk in _chunks(curves, TCP_STATE_CURVES_PER_FIGURE):
                sec.figure(rp.tcp_state_figure(chunk, title=f"{cell_label(cell)} seed {r.seed}"),
                           f"TCP state over time of {cell_label(cell)!r}, seed {r.seed} (first complete "
                           "repetition with TCP state records): congestion window, smoothed RTT and "
                           "delivery rate of every TCP connection, sampled by the sender.")
                figures += 1
            break
    return figures


def _shown_columns(columns: list, shown: tuple[str, ...]) -> list[tuple[str, Callable]]:
    return [(header, fn) for metric, header, fn in columns if metric in shown]


def _chunks(items: list, n: int) -> list[list]:
    return [items[i:i + n] for i in range(0, len(items), n)] if items else []


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
