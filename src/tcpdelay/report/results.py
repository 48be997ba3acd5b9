"""Results of ``tcpdelay run`` / ``tcpdelay sweep`` as tables and plots (``tcpdelay report``).

:func:`load_results` reads a results directory of any of three shapes (see
docs/experiments/README.md, "Output"):

- a *sweep* directory (``sweep.json``, ``cells/<id>/seed-<s>/``),
- a *run* directory of ``tcpdelay run`` (``seed-<s>/`` run directories),
- one run directory (``complete.json`` / ``failed.json`` / ``run.json`` / records).

Every complete run with per-packet records (``sent/`` and ``received/`` as the run wrote them,
or else the compact ``packets.parquet`` of :mod:`tcpdelay.metrics.run_packets`, the one that is
committed) is measured again from them with :func:`tcpdelay.metrics.summary.summarize_flows`
(the same numbers as its ``metrics.json``, plus the quality levels over time). A complete run
measured before runs kept ``packets.parquet`` has its per-run figures from its ``metrics.json``
and its packets' delays from a ``delays`` packets file where they survived
(``RunData.packets``). A run that is not complete (interrupted, or failed: listed with its
error) is left out.

:func:`aggregate_cell` joins the repetitions of a cell per media flow: the delay statistics
(mean, standard deviation, percentiles) and the late fractions over the *pooled* packets of every
repetition — as Brosh et al. §5.1 average their ten five-minute runs — with the spread of the
per-run means; loss over the pooled packets; the per-run figures that have no pooled form
(E-model MOS, share of acceptable quality, RTPI, goodput, Jain's index) as the mean over the
repetitions.

:func:`build_report` adds the tables and figures to a :class:`tcpdelay.report.html.Report` and
returns the same figures as plain data (the JSON of ``tcpdelay report --json``).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.metrics import delay as dl
from tcpdelay.metrics.summary import MetricOptions

#: Playout delays (s) whose late fraction the tables show (all of them go into the JSON and plots).
TABLE_PLAYOUT_DELAYS_S = (0.1, 0.2, 0.4)
#: Playout delays (s) of the late-fraction plots and the JSON.
PLOT_PLAYOUT_DELAYS_S = tuple(np.round(np.concatenate([np.arange(0.02, 0.2, 0.01),
                                                         np.arange(0.2, 1.0, 0.05),
                                                         np.arange(1.0, 5.01, 0.25)]), 4).tolist())
#: Bin of the quality-over-time series (s).
QUALITY_BIN_S = 0.5
#: Curves per figure (more cells are drawn in several figures).
CURVES_PER_FIGURE = 10

COMPLETE = "complete.json"
FAILED = "failed.json"


@dataclass
class FlowRun:
    """One media flow of one run: its per-packet delays (NaN = not received) and metrics."""

    flow_id: int
    name: str
    delay_s: np.ndarray | None
    """None when the run's per-packet delays were never kept (its metrics are from metrics.json)."""
    send_time_s: np.ndarray | None
    dropped: np.ndarray | None
    metrics: dict


@dataclass
class RunData:
    seed: int | None
    run_dir: Path
    status: str
    """complete | failed | incomplete (no complete.json: interrupted or still running)"""
    error: str | None = None
    flows: list[FlowRun] = field(default_factory=list)
    jain_index: float | None = None
    wall_s: float | None = None
    packets: str = "none"
    """Where the per-packet data came from: records (sent/ and received/, or packets.parquet of
    kind records: metrics recomputed) | delays (a delays-only packets.parquet; metrics from
    metrics.json) | none (metrics.json only)"""


@dataclass
class CellData:
    id: str
    label: str
    overrides: dict
    runs: list[RunData]


@dataclass
class Results:
    path: Path
    kind: str
    """sweep | run (a tcpdelay run directory with seed-*/) | single (one run directory)"""
    name: str
    cells: list[CellData]


def _seed_of(path: Path) -> int | None:
    m = re.fullmatch(r"seed-(-?\d+)", path.name)
    return int(m.group(1)) if m else None


def _is_run_dir(path: Path) -> bool:
    return any((path / n).exists() for n in (COMPLETE, FAILED, "run.json", "received", "sent"))


def _seed_dirs(path: Path) -> list[Path]:
    if not path.is_dir():
        return []
    dirs = [p for p in path.glob("seed-*") if p.is_dir() and _seed_of(p) is not None]
    return sorted(dirs, key=lambda p: _seed_of(p))


def load_results(path: str | os.PathLike, opts: MetricOptions | None = None,
                 progress: Callable[[int, int], None] | None = None) -> Results:
    """Read every run under ``path`` (a sweep, a ``tcpdelay run`` directory or one run);
    ``progress(done, total)`` is called after each run is read."""
    root = Path(path)
    if not root.exists():
        raise ParameterError(f"RESULTS: {str(root)!r} does not exist")
    if not root.is_dir():
        raise ParameterError(f"RESULTS: {str(root)!r} is not a directory (give a run or sweep "
                             "directory written by tcpdelay run / tcpdelay sweep)")
    opts = opts or MetricOptions(series=True, series_bin_s=QUALITY_BIN_S)
    index = root / "sweep.json"
    # (id, label, overrides, run directories) per cell, then read the runs
    if index.is_file():
        try:
            doc = json.loads(index.read_text())
            plan = [(str(c["id"]), c.get("label") or "-", dict(c.get("overrides") or {}),
                     _seed_dirs(root / "cells" / str(c["id"]))) for c in doc["cells"]]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ParameterError(f"RESULTS: {str(index)!r} is not a sweep index ({err})") from None
        kind, name = "sweep", str(doc.get("name") or root.name)
    elif _seed_dirs(root):
        plan = [("-", "-", {}, _seed_dirs(root))]
        kind, name = "run", _scenario_name(root)
    elif _is_run_dir(root):
        plan = [("-", "-", {}, [root])]
        kind, name = "single", _scenario_name(root)
    else:
        raise ParameterError(f"RESULTS: {str(root)!r} is neither a sweep directory (sweep.json), a run "
                             "directory (seed-*/) nor one run (complete.json, records)")
    total = sum(len(dirs) for *_, dirs in plan)
    done = 0
    cells = []
    for cid, label, overrides, dirs in plan:
        runs = []
        for d in dirs:
            runs.append(_load_run(d, opts))
            done += 1
            if progress is not None:
                progress(done, total)
        cells.append(CellData(cid, label, overrides, runs))
    return Results(root, kind, name, cells)


def _scenario_name(path: Path) -> str:
    sc = path / "scenario.toml"
    if sc.is_file():
        import tomllib

        try:
            return str(tomllib.loads(sc.read_text()).get("name") or path.name)
        except (OSError, ValueError):
            pass
    return path.name


def _flow_names(run_dir: Path) -> dict[int, str]:
    f = run_dir / "flows.parquet"
    if not f.is_file():
        return {}
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(f).to_pylist()
    except Exception:  # a damaged summary file only loses the names
        return {}
    return {int(r["flow_id"]): str(r["name"]) for r in rows if r.get("kind") in (None, "media")}


def _load_run(run_dir: Path, opts: MetricOptions) -> RunData:
    from tcpdelay.metrics.packets import load_flows
    from tcpdelay.metrics.summary import summarize_flows
    from tcpdelay.records import read_run_metadata
    from tcpdelay.metrics.run_packets import read_run_packets

    seed = _seed_of(run_dir)
    status, error, wall = "incomplete", None, None
    if (run_dir / COMPLETE).is_file():
        status = "complete"
        try:
            wall = json.loads((run_dir / COMPLETE).read_text()).get("wall_s")
        except (OSError, ValueError):
            pass
    elif (run_dir / FAILED).is_file():
        status = "failed"
        try:
            error = json.loads((run_dir / FAILED).read_text()).get("error")
        except (OSError, ValueError):
            error = "failed.json unreadable"
    run = RunData(seed, run_dir, status, error, wall_s=wall)
    if status != "complete":
        return run  # partial records of an interrupted or failed run are not a result
    names = _flow_names(run_dir)
    try:
        if any((run_dir / k).is_dir() for k in ("sent", "received")):
            flows, meta = load_flows(run_dir)  # the records as the run wrote them
            run.packets = "records"
        else:
            stored = read_run_packets(run_dir)
            if stored is not None and stored.kind == "records":
                flows, meta = stored.flows, read_run_metadata(run_dir)
                run.packets = "records"
            else:
                return _load_from_metrics(run, names, stored)
    except ParameterError as err:
        run.status, run.error = "failed", str(err)
        return run
    summary = summarize_flows(flows, meta, opts)
    for fp, m in zip(flows, summary["flows"]):
        run.flows.append(FlowRun(fp.flow_id, names.get(fp.flow_id, f"flow{fp.flow_id}"),
                                 fp.delay_s, fp.send_time_s, fp.dropped, m))
    run.jain_index = summary["fairness"]["jain_index_goodput"]
    return run


def _load_from_metrics(run: RunData, names: dict[int, str], stored) -> RunData:
    """A complete run without per-packet records (measured before runs kept ``packets.parquet``):
    its metrics from ``metrics.json``, its delays from a ``delays`` packets file when there is
    one (else no per-packet delays: ``run.packets == "none"``)."""
    delays = {f.flow_id: f for f in stored.flows} if stored is not None else {}
    try:
        metrics = json.loads((run.run_dir / "metrics.json").read_text())
    except (OSError, ValueError):
        metrics = None
    if metrics is None and not delays:
        run.status = "failed"
        run.error = "complete, but neither per-packet records (sent/, received/, packets.parquet) nor metrics.json are there"
        return run
    if metrics is not None:
        per_flow = {int(m["flow_id"]): m for m in metrics.get("flows", [])}  # media flows only
        run.jain_index = (metrics.get("fairness") or {}).get("jain_index_goodput")
    else:  # only the delays survive: the delay statistics and loss from them
        per_flow = {fid: _metrics_from_delays(f.delay_s) for fid, f in delays.items()}
    run.packets = "delays" if delays else "none"
    for fid in sorted(set(per_flow) | set(delays)):
        d = delays.get(fid)
        m = per_flow.get(fid) or _metrics_from_delays(d.delay_s)
        run.flows.append(FlowRun(fid, names.get(fid, f"flow{fid}"),
                                 d.delay_s if d is not None else None,
                                 d.send_time_s if d is not None else None,
                                 np.zeros(d.delay_s.size, bool) if d is not None else None, m))
    return run


def _metrics_from_delays(delay_s: np.ndarray) -> dict:
    """The per-run figures that per-packet delays alone give (the rest: None)."""
    n = int(delay_s.size)
    got = int(np.count_nonzero(np.isfinite(delay_s)))
    return {"delay": dl.delay_stats(delay_s), "packets": {"loss_rate": (n - got) / n if n else None,
                                                           "sent": n, "received": got},
            "rtpi": {}, "goodput_bps": None, "tcp_retransmissions": None}


def _mean(values) -> float | None:
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
            "mos": _mean(v["emodel"]["best"]["mos"] for v in voice) if voice else None,
            "acceptable_quality_fraction": _mean(v["quality"]["acceptable_fraction"] for v in voice)
            if voice else None,
            "rtpi": _mean(f.metrics["rtpi"].get("rtpi") for f in frs),
            "goodput_bps": _mean(f.metrics["goodput_bps"] for f in frs),
            "jitter_rfc3550_s": _mean(f.metrics.get("jitter_rfc3550_s") for f in frs),
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
        k: _mean(s.get(k) for s in stats) for k in stats[0] if k not in ("count", "relative_to_min")}
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
        jain = _mean(r.jain_index for r in cell.runs if r.status == "complete")
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
    if not figures:
        sec.paragraph("No complete run with media records: nothing to plot." if names else
                      f"No figure of the metrics shown ({', '.join(shown)}).", note=True)
    return {"results": str(results.path), "kind": results.kind, "name": results.name,
            "metrics": list(shown), "runs": counts, "packets": sources,
            "table_playout_delays_s": list(TABLE_PLAYOUT_DELAYS_S), "cells": cells_out,
            "figures": figures}


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


def _shown_columns(columns: list, shown: tuple[str, ...]) -> list[tuple[str, Callable]]:
    return [(header, fn) for metric, header, fn in columns if metric in shown]


def aggregate_cell_cached(cells_out: list[dict], cell: CellData) -> list[dict]:
    for c in cells_out:
        if c["id"] == cell.id and c["label"] == cell.label:
            return c["flows"]
    return aggregate_cell(cell)


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
