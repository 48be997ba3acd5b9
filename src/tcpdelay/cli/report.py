"""``tcpdelay report``: the tables and plots of a run or sweep directory in one HTML file."""

from __future__ import annotations

import math

import click
from rich.table import Table

from tcpdelay.cli.common import emit, fmt_s, json_option


def _mos(f: dict) -> str:
    return "—" if f["mos"] is None or not math.isfinite(f["mos"]) else f"{f['mos']:.2f}"


#: The text table's columns: (metric of the scenario's `metrics` that shows it, or None for
#: always; header; value of an aggregated flow).
_COLUMNS = [(None, "parameters", None), (None, "flow", None), (None, "runs", None),
            ("loss", "loss", lambda f: "—" if f["loss_rate"] is None else f"{f['loss_rate'] * 100:.2f} %"),
            ("delay", "mean", lambda f: fmt_s(f["delay"]["mean_s"])),
            ("delay", "p95", lambda f: fmt_s(f["delay"].get("p95_s"))),
            ("delay", "std", lambda f: fmt_s(f["delay"]["std_s"])),
            ("mos", "MOS", _mos)]


def _human(doc: dict):
    def show(console) -> None:
        table = Table(title=f"{doc['name']}: {doc['results']}", title_justify="left")
        shown = set(doc["metrics"])  # the scenario's `metrics`
        cols = [(m, h, fn) for m, h, fn in _COLUMNS if m is None or m in shown]
        for _, col, _ in cols:
            table.add_column(col)
        for c in doc["cells"]:
            for f in c["flows"]:
                table.add_row(c["label"], f["name"], str(f["runs"]), *(fn(f) for m, _, fn in cols if m is not None))
        console.print(table)
        r = doc["runs"]
        console.print(f"{r['complete']} complete, {r['failed']} failed, {r['incomplete']} incomplete runs; "
                      f"report written to [bold]{doc['report_path']}[/bold]")
    return show


@click.command("report")
@click.argument("results", type=click.Path(), nargs=-1, required=True)
@click.option("--out", "out_file", type=click.Path(), default=None,
              help="HTML file to write [default: RESULTS/report.html; with several RESULTS: comparison.html].")
@click.option("--label", "labels", multiple=True, metavar="NAME",
              help="Name of a RESULTS directory in a comparison or CSV export: one per directory, in "
                   "order [default: the directories' names].")
@click.option("--csv", "csv_dir", type=click.Path(), default=None, metavar="DIR",
              help="Write the tables as CSV into DIR (packets.csv, flows.csv, cells.csv) instead of the HTML.")
@json_option
def report_cmd(results, out_file, labels, csv_dir, as_json):
    """Write one self-contained HTML report (tables, embedded plots) of RESULTS: a run directory
    (tcpdelay run), one run, or a sweep directory (tcpdelay sweep). Repetitions of a cell are
    joined: delay statistics over their pooled packets, per-run figures averaged. The tables and
    figures show the metrics the scenario lists (its `metrics` key; every metric when RESULTS has
    no scenario.toml); the JSON has them all. With several RESULTS, one page compares them: a
    figure per metric with a series per directory and a table with a column per directory, cells
    matched by their parameters (docs/cli.md). --csv DIR exports the per-packet, per-flow and
    per-cell tables as CSV instead."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tcpdelay.errors import ParameterError
    from tcpdelay.report.results import write_report

    if csv_dir is not None and out_file is not None:
        raise ParameterError("give --out (the HTML report) or --csv DIR (the tables as CSV), not both")
    if labels and len(results) == 1 and csv_dir is None:
        raise ParameterError("--label names the directories of a comparison (several RESULTS) or of a "
                             "--csv export; one report needs none")
    err = Console(stderr=True)
    with Progress(TextColumn("reading runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:  # no stray line
        task = bar.add_task("runs", total=None)

        def progress(done, total):
            bar.update(task, completed=done, total=total)
        if csv_dir is not None:
            from tcpdelay.report.csv_export import export_csv

            doc = export_csv(results, csv_dir, labels or None, progress=progress)
            show = _human_csv(doc)
        elif len(results) > 1:
            from tcpdelay.report.compare import write_comparison

            doc = write_comparison(results, out_file or "comparison.html", labels or None, progress=progress)
            show = _human_compare(doc)
        else:
            doc = write_report(results[0], out_file, progress=progress)
            show = _human(doc)
    emit(doc, as_json, show)


def _human_compare(doc: dict):
    def show(console) -> None:
        from rich.table import Table

        table = Table(title="compared", title_justify="left")
        for h in ("label", "directory", "cells", "matched"):
            table.add_column(h, justify="right" if h in ("cells", "matched") else "left", overflow="fold")
        for r in doc["results"]:
            table.add_row(r["label"], r["results"], str(r["cells"]), str(r["matched_cells"]))
        console.print(table)
        console.print(f"{len(doc['rows'])} rows matched by {doc['match']}, {len(doc['metrics'])} metrics, "
                      f"{doc['figures']} figures; comparison written to [bold]{doc['report_path']}[/bold]")
    return show


def _human_csv(doc: dict):
    def show(console) -> None:
        for f in doc["files"].values():
            console.print(f"{f['rows']} rows: [bold]{f['path']}[/bold]")
    return show


COMMANDS = [report_cmd]
