"""Results side by side (``tcpdelay report DIR1 DIR2 …``): the same metrics of several runs or
sweeps in one HTML page, one figure per metric with a series per directory and a table with a
column per directory (as flent overlays its runs).

The data side is :mod:`tcpdelay.results` (:func:`~tcpdelay.results.load_results`, and
:func:`~tcpdelay.results.aggregate_cell` joining each cell's repetitions, exactly as the
one-directory report does); this module matches the cells and flows of the directories and draws.

**Matching rule** (docs/cli.md, ``report``):

1. *By parameters.* A cell is known by its overrides, flattened (``path.forward.queue_packets``;
   :mod:`tcpdelay.report.cell_keys`). Cells of different directories with the same parameters
   are one row; a row is kept when at least two directories have it (the others show ``—``).
   A ``tcpdelay run`` directory and one run have no overrides, so two of them match each other.
2. *By position*, when no cell's parameters are shared: the i-th cell of every directory, which
   needs the same number of cells everywhere.
3. Within a matched cell, media flows by name; when no name is shared and every directory has
   as many flows, by position.

A directory none of whose cells and flows match another's is refused (one line, exit 2), as is
a comparison with nothing in common (e.g. a sweep of media flows and one of transfers only).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.report.cell_keys import flat_params, params_key
from tcpdelay.report.cell_labels import compact_labels
from tcpdelay.results import CellData, Results, aggregate_cell, finite_mean, late_at, load_results

__all__ = ["CDF_ROWS", "COMPARED_METRICS", "ROWS_PER_FIGURE", "Compared", "Row", "Side",
           "build_comparison", "default_labels", "load_sides", "match_rows", "write_comparison"]

#: Matched rows whose delay CDFs are drawn (the first ones; the JSON and tables have every row).
CDF_ROWS = 8
#: Rows per metric figure (more are drawn in several figures).
ROWS_PER_FIGURE = 45


@dataclass(frozen=True)
class Compared:
    """A metric compared: JSON key (unit in the name), title, unit shown, the scenario metric
    that asks for it, its value from an aggregated flow and the cell's Jain index (SI units), the
    factor to the unit shown, and the format shown."""

    key: str
    title: str
    unit: str
    metric: str
    value: Callable[[dict, float | None], float | None]
    scale: float = 1.0
    fmt: str = ".3g"


def _tcp_per_run(a: dict, j: float | None) -> float | None:
    return None if a["tcp_retransmissions"] is None or not a["runs"] else a["tcp_retransmissions"] / a["runs"]


#: The metrics compared, in the order shown (the per-cell table's columns of a one-directory report).
COMPARED_METRICS: tuple[Compared, ...] = (
    Compared("loss_rate", "loss", "%", "loss", lambda a, j: a["loss_rate"], 100, ".2f"),
    Compared("delay_mean_s", "mean delay", "ms", "delay", lambda a, j: a["delay"].get("mean_s"), 1e3, ".1f"),
    Compared("delay_std_s", "delay standard deviation", "ms", "delay", lambda a, j: a["delay"].get("std_s"), 1e3, ".1f"),
    Compared("delay_p95_s", "95th percentile delay", "ms", "delay", lambda a, j: a["delay"].get("p95_s"), 1e3, ".1f"),
    Compared("delay_p99_s", "99th percentile delay", "ms", "delay", lambda a, j: a["delay"].get("p99_s"), 1e3, ".1f"),
    Compared("delay_max_s", "maximum delay", "ms", "delay", lambda a, j: a["delay"].get("max_s"), 1e3, ".1f"),
    *(Compared(f"late_fraction_at_{x:g}_s", f"late at {x * 1e3:g} ms playout", "%", "late",
               lambda a, j, x=x: late_at(a, x), 100, ".2f") for x in (0.1, 0.2, 0.4)),
    Compared("jitter_rfc3550_s", "jitter (RFC 3550)", "ms", "jitter", lambda a, j: a["jitter_rfc3550_s"], 1e3, ".2f"),
    Compared("mos", "MOS (E-model)", "", "mos", lambda a, j: a["mos"], 1, ".2f"),
    Compared("acceptable_quality_fraction", "acceptable quality", "%", "quality",
             lambda a, j: a["acceptable_quality_fraction"], 100, ".1f"),
    Compared("rtpi", "RTPI", "", "rtpi", lambda a, j: a["rtpi"], 1, ".3f"),
    Compared("goodput_bps", "goodput", "kb/s", "goodput", lambda a, j: a["goodput_bps"], 1e-3, ".1f"),
    Compared("picture_discard_fraction", "video frames discarded", "%", "playout",
             lambda a, j: a["picture_discard_fraction"], 100, ".2f"),
    Compared("tcp_retransmissions_per_run", "TCP retransmissions per run", "", "tcp", _tcp_per_run, 1, ".1f"),
    Compared("jain_index_goodput", "Jain's index (goodput)", "", "fairness", lambda a, j: j, 1, ".3f"),
)


@dataclass
class Side:
    """One directory of the comparison, read and its cells joined."""

    label: str
    results: Results
    shown: tuple[str, ...]
    aggs: dict[str, list[dict]] = field(default_factory=dict)
    """cell id -> :func:`aggregate_cell` of the cell"""
    jain: dict[str, float | None] = field(default_factory=dict)


@dataclass
class Row:
    """One matched cell and flow: its label, its parameters (None when matched by position),
    the flow's name, and per directory the cell and the aggregated flow (None: not there)."""

    label: str
    params: dict | None
    flow: str
    cells: list[CellData | None]
    aggs: list[dict | None]


def default_labels(paths: Sequence[str | os.PathLike]) -> list[str]:
    """The directories' names, with as many parent folders as it takes to tell them apart."""
    parts = [Path(os.path.abspath(p)).parts for p in paths]
    for n in range(1, max(len(p) for p in parts) + 1):
        labels = ["/".join(p[-n:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    raise ParameterError("RESULTS: the same directory is given twice; give different directories to compare")


def load_sides(paths: Sequence[str | os.PathLike], labels: Sequence[str] | None = None,
               progress: Callable[[int, int], None] | None = None) -> list[Side]:
    """Read every directory (``progress(done, total)`` over all their runs) and join each cell's
    repetitions. ``labels``: one per directory (default :func:`default_labels`)."""
    from tcpdelay.report.shown_metrics import shown_metrics

    if labels:
        if len(labels) != len(paths):
            raise ParameterError(f"--label: {len(labels)} label(s) for {len(paths)} RESULTS directories; "
                                 "give one --label per directory, in the same order, or none")
        if any(not str(lb).strip() for lb in labels) or len(set(labels)) != len(labels):
            raise ParameterError(f"--label: {list(labels)!r}: labels must be non-empty and differ")
    names = list(labels) if labels else default_labels(paths)
    if len({os.path.realpath(p) for p in paths}) != len(paths):
        raise ParameterError("RESULTS: the same directory is given twice; give different directories to compare")
    sides = []
    done_before = 0
    for path, label in zip(paths, names):
        def step(done: int, total: int, base: int = done_before) -> None:
            if progress is not None:
                progress(base + done, None)
        res = load_results(path, progress=step)
        done_before += sum(len(c.runs) for c in res.cells)
        side = Side(label, res, shown_metrics(res.path))
        for c in res.cells:
            side.aggs[c.id] = aggregate_cell(c)
            side.jain[c.id] = finite_mean(r.jain_index for r in c.runs if r.status == "complete")
        sides.append(side)
    return sides


def _flow_rows(cells: list[CellData | None], sides: list[Side]) -> list[tuple[str, list[dict | None]]]:
    """The flows of one matched cell: (name, aggregated flow per directory), by name, else by
    position (rule 3)."""
    per = [sides[i].aggs.get(c.id, []) if c is not None else [] for i, c in enumerate(cells)]
    present = [p for p in per if p]
    names: list[str] = []
    for p in per:
        names.extend(a["name"] for a in p if a["name"] not in names)
    shared = [n for n in names if sum(any(a["name"] == n for a in p) for p in per) >= 2]
    if shared:
        return [(n, [next((a for a in p if a["name"] == n), None) for p in per]) for n in shared]
    if len(present) >= 2 and len({len(p) for p in present}) == 1:
        return [(" | ".join(dict.fromkeys(p[k]["name"] for p in present)), [p[k] if p else None for p in per])
                for k in range(len(present[0]))]
    return []


def match_rows(sides: list[Side]) -> tuple[str, list[Row]]:
    """The rows of the comparison and how they were matched (``parameters`` | ``position``);
    see the module doc. Raises ParameterError when there is nothing to compare."""
    for s in sides:
        if not any(s.aggs.values()):
            raise ParameterError(f"RESULTS: {str(s.results.path)!r} ({s.label}) has no media flow to compare "
                                 "(its own report shows what it measured: tcpdelay report DIR); compared are "
                                 "the media flows of matched cells")
    keyed = [{params_key(c.overrides): c for c in s.results.cells} for s in sides]
    order: list[str] = []
    for k in keyed:
        order.extend(x for x in k if x not in order)
    shared = [x for x in order if sum(x in k for k in keyed) >= 2]
    if shared:
        how = "parameters"
        groups = [[k.get(x) for k in keyed] for x in shared]
        params = [flat_params(next(c for c in g if c is not None).overrides) for g in groups]
        cell_labels = compact_labels([next(c for c in g if c is not None).overrides for g in groups])
    else:
        counts = [len(s.results.cells) for s in sides]
        if len(set(counts)) != 1:
            raise ParameterError(
                "RESULTS: the directories share no cell (no two cells with the same parameters) and have "
                f"different numbers of cells ({', '.join(f'{s.label}: {n}' for s, n in zip(sides, counts))}), "
                "so they cannot be matched by position either")
        how = "position"
        groups = [[s.results.cells[i] for s in sides] for i in range(counts[0])]
        params = [None] * counts[0]
        per_side = [compact_labels([c.overrides for c in s.results.cells]) for s in sides]
        cell_labels = [f"#{i + 1} " + " | ".join(dict.fromkeys(lb[i] for lb in per_side)) for i in range(counts[0])]
    rows: list[Row] = []
    for g, p, lb in zip(groups, params, cell_labels):
        for flow, aggs in _flow_rows(g, sides):
            rows.append(Row(lb, p, flow, g, aggs))
    for i, s in enumerate(sides):
        if not any(r.aggs[i] is not None for r in rows):
            raise ParameterError(f"RESULTS: {str(s.results.path)!r} ({s.label}) has no cell and media flow in "
                                 f"common with the others (matched by {how}: cells, then flows by name)")
    return how, rows


def _row_names(rows: list[Row]) -> list[str]:
    """Row labels for figures: the cell, and the flow when the rows have several."""
    several = len({r.flow for r in rows}) > 1
    return [(f"{r.label} · {r.flow}" if r.label != "-" else r.flow) if several or r.label == "-" else r.label
            for r in rows]


def _fmt(x: float | None, c: Compared) -> str:
    return "—" if x is None or not math.isfinite(x) else format(x * c.scale, c.fmt)


def _values(c: Compared, rows: list[Row], sides: list[Side]) -> list[list[float | None]]:
    out = []
    for r in rows:
        vals = []
        for i, a in enumerate(r.aggs):
            v = c.value(a, sides[i].jain.get(r.cells[i].id)) if a is not None else None
            vals.append(float(v) if v is not None and math.isfinite(float(v)) else None)
        out.append(vals)
    return out


def build_comparison(sides: list[Side], report) -> dict:
    """Add the comparison's sections to ``report`` (a :class:`tcpdelay.report.html.Report`) and
    return its data (``tcpdelay report DIR1 DIR2 --json``)."""
    how, rows = match_rows(sides)
    labels = [s.label for s in sides]
    names = _row_names(rows)
    several_flows = len({r.flow for r in rows}) > 1

    sec = report.section("Overview")
    overview, results_out = [], []
    for i, s in enumerate(sides):
        runs = [r for c in s.results.cells for r in c.runs]
        counts = {k: sum(r.status == k for r in runs) for k in ("complete", "failed", "incomplete")}
        matched = len({r.cells[i].id for r in rows if r.aggs[i] is not None})
        overview.append([s.label, str(s.results.path), s.results.name, len(s.results.cells), matched,
                         counts["complete"], counts["failed"] + counts["incomplete"]])
        results_out.append({"label": s.label, "results": str(s.results.path), "kind": s.results.kind,
                            "name": s.results.name, "cells": len(s.results.cells), "matched_cells": matched,
                            "runs": counts, "metrics": list(s.shown)})
    sec.table(["label", "directory", "scenario", "cells", "matched", "complete runs", "other runs"], overview)
    rule = ("cells with the same parameters (their overrides) are one row, kept when at least two "
            "directories have it" if how == "parameters" else
            "no cell's parameters are shared, so the i-th cell of each directory makes row i")
    sec.paragraph(f"{len(rows)} row(s) compared, matched by {how}: {rule}; within a cell, media flows "
                  "by name. Each directory's cells are its repetitions joined as in its own report "
                  "(delay statistics and late fractions over the pooled packets; MOS, goodput and "
                  "the others averaged over the runs). — : not in that directory, or not measured.")

    shown = {m for s in sides for m in s.shown}
    metrics_out, figures = [], 0
    for c in COMPARED_METRICS:
        if c.metric not in shown:
            continue
        vals = _values(c, rows, sides)
        if not any(v is not None for row in vals for v in row):
            continue
        metrics_out.append({"key": c.key, "title": c.title, "unit": c.unit, "values": vals})
        unit = f" ({c.unit})" if c.unit else ""
        sec = report.section(f"{c.title[0].upper()}{c.title[1:]}{unit}")
        for lo in range(0, len(rows), ROWS_PER_FIGURE):
            chunk = slice(lo, lo + ROWS_PER_FIGURE)
            sec.figure(dot_figure(names[chunk], [[None if v is None else v * c.scale for v in row]
                                                 for row in vals[chunk]], labels,
                                  title=c.title, xlabel=f"{c.title}{unit}"),
                       f"{c.title[0].upper()}{c.title[1:]}{unit} per matched cell, one marker per directory.")
            figures += 1
        diff = len(sides) == 2
        head = ["parameters", *(["flow"] if several_flows else []), *labels,
                *([f"{labels[1]} − {labels[0]}"] if diff else [])]
        body = []
        for r, row in zip(rows, vals):
            d = (row[1] - row[0]) if diff and row[0] is not None and row[1] is not None else None
            body.append([r.label, *([r.flow] if several_flows else []), *(_fmt(v, c) for v in row),
                         *([_fmt(d, c)] if diff else [])])
        sec.table(head, body)

    # the first flow of every cell first, then the second...: the CDFs drawn span the cells
    rank = [sum(rows[i].cells == r.cells for i in range(k)) for k, r in enumerate(rows)]
    cdf_rows = sorted((k for k, r in enumerate(rows) if sum(a is not None and a["pooled"] for a in r.aggs) >= 2),
                      key=lambda k: (rank[k], k))
    if "delay" in shown and cdf_rows:
        sec = report.section("Delay CDFs")
        for k in cdf_rows[:CDF_ROWS]:
            series = [(s.label, _pooled_delays(r_cell, a)) for s, r_cell, a in zip(sides, rows[k].cells, rows[k].aggs)
                      if a is not None and a["pooled"]]
            sec.figure(cdf_figure(series, title=names[k]),
                       f"Delay CDF of {names[k]} (pooled repetitions), one curve per directory.")
            figures += 1
        if len(cdf_rows) > CDF_ROWS:
            sec.paragraph(f"The first {CDF_ROWS} of {len(cdf_rows)} matched rows are drawn; compare one cell's "
                          "runs with tcpdelay report CELL_DIR1 CELL_DIR2.", note=True)
    if not metrics_out:
        raise ParameterError("RESULTS: the matched flows have no metric measured in more than one directory; "
                             "nothing to compare")
    return {"results": results_out, "match": how,
            "rows": [{"label": r.label, "flow": r.flow, "parameters": r.params,
                      "cells": [c.id if c is not None and a is not None else None for c, a in zip(r.cells, r.aggs)]}
                     for r in rows],
            "metrics": metrics_out, "figures": figures}


def _pooled_delays(cell: CellData, agg: dict) -> np.ndarray:
    ds = [f.delay_s for r in cell.runs if r.status == "complete" for f in r.flows
          if f.flow_id == agg["flow_id"] and f.delay_s is not None]
    return np.concatenate(ds) if ds else np.zeros(0)


_MARKERS = "osD^v<>p*h"


def _plain_log_ticks(axis) -> None:
    """Tick labels of a log axis as plain numbers (``200``, ``0.5``, not ``2×10²``): every
    decade, and the 2s and 5s between them while the axis spans at most four decades."""
    from matplotlib.ticker import FuncFormatter

    if axis.get_scale() != "log":
        return

    def minor(v: float, _pos) -> str:
        lo, hi = sorted(axis.get_view_interval())
        if lo <= 0 or math.log10(hi / lo) > 4:
            return ""
        lead = round(v / 10 ** math.floor(math.log10(v) + 1e-9), 6)
        return f"{v:g}" if lead in (2.0, 5.0) else ""

    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(minor))


def dot_figure(rows: Sequence[str], values: Sequence[Sequence[float | None]], series: Sequence[str], *,
               title: str, xlabel: str):
    """One metric across matched rows: a row per cell (first on top), one marker per directory
    (``values[row][directory]``, None: absent), a grey bar joining a row's values; the legend is
    outside the axes, right of them, so it covers nothing. A log axis when every value is
    positive and they span more than a factor 30."""
    from matplotlib.figure import Figure

    n = len(rows)
    fig = Figure(figsize=(9.0, 1.4 + 0.24 * n))
    ax = fig.add_subplot()
    y = np.arange(n)[::-1]
    for yi, row in zip(y, values):
        xs = [v for v in row if v is not None]
        if len(xs) > 1:
            ax.plot([min(xs), max(xs)], [yi, yi], color="0.8", linewidth=2, zorder=1, solid_capstyle="round")
    for j, name in enumerate(series):
        pts = [(v[j], yi) for yi, v in zip(y, values) if v[j] is not None]
        if pts:
            xs, ys = zip(*pts)
            ax.scatter(xs, ys, marker=_MARKERS[j % len(_MARKERS)], s=26, zorder=2 + j, label=name,
                       facecolors="none" if j else None, edgecolors=f"C{j % 10}", color=f"C{j % 10}")
        else:
            ax.scatter([], [], marker=_MARKERS[j % len(_MARKERS)], label=f"{name} (none)")
    allv = [v for row in values for v in row if v is not None]
    if allv and min(allv) > 0 and max(allv) / min(allv) > 30:
        ax.set_xscale("log")
    elif allv and min(allv) >= 0:  # a non-negative metric: from 0 (all zero: a unit axis)
        right = max(allv) * 1.05 if max(allv) > 0 else 1.0
        ax.set_xlim(-0.03 * right, right)
    _plain_log_ticks(ax.xaxis)
    ax.set_yticks(y, list(rows), fontsize=7)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    fig.tight_layout()
    return fig


def cdf_figure(series: Sequence[tuple[str, np.ndarray]], *, title: str):
    """Empirical delay CDFs of the received packets (NaN: not received, left out), one per
    ``(directory label, delay_s)``, on a log delay axis; the legend right of the axes."""
    from matplotlib.figure import Figure

    from tcpdelay.report.results_plots import ecdf_steps

    fig = Figure(figsize=(9.0, 3.8))
    ax = fig.add_subplot()
    for j, (label, d) in enumerate(series):
        x, y = ecdf_steps(d)
        if x.size:
            ax.step(x * 1e3, y, where="post", label=label, color=f"C{j % 10}")
    ax.set_xscale("log")
    _plain_log_ticks(ax.xaxis)
    ax.set_xlabel("one-way delay (ms, log)")
    ax.set_ylabel("P(delay ≤ x)")
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    fig.tight_layout()
    return fig


def check_out_path(out: str | os.PathLike) -> Path:
    """``--out`` of a comparison: an ``.html`` file whose folder exists or is one level below
    one that does (only that last level is created). Raises ParameterError otherwise."""
    target = Path(out)
    if target.suffix.lower() not in (".html", ".htm"):
        raise ParameterError(f"--out: {str(target)!r}: the comparison is an HTML file; give a name ending in .html")
    if target.is_dir():
        raise ParameterError(f"--out: {str(target)!r} is a directory; give a file name")
    parent = target.absolute().parent
    if not parent.is_dir() and not parent.parent.is_dir():
        raise ParameterError(f"--out: {str(parent.parent)!r} does not exist (only the last folder of --out is created)")
    return target


def write_comparison(paths: Sequence[str | os.PathLike], out: str | os.PathLike,
                     labels: Sequence[str] | None = None,
                     progress: Callable[[int, int], None] | None = None) -> dict:
    """Read ``paths``, compare them and write the HTML page to ``out``; returns the data with
    ``report_path``."""
    from tcpdelay.report.html import Report

    target = check_out_path(out)
    sides = load_sides(paths, labels, progress)
    report = Report("tcpdelay comparison: " + " vs ".join(s.label for s in sides))
    data = build_comparison(sides, report)
    try:
        data["report_path"] = str(report.write(target))
    except OSError as err:
        raise ParameterError(f"--out: cannot write {str(target)!r}: {err.strerror or err}") from None
    return data
