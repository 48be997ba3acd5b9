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
@click.argument("results", type=click.Path())
@click.option("--out", "out_file", type=click.Path(), default=None,
              help="HTML file to write [default: RESULTS/report.html].")
@json_option
def report_cmd(results, out_file, as_json):
    """Write one self-contained HTML report (tables, embedded plots) of RESULTS: a run directory
    (tcpdelay run), one run, or a sweep directory (tcpdelay sweep). Repetitions of a cell are
    joined: delay statistics over their pooled packets, per-run figures averaged. The tables and
    figures show the metrics the scenario lists (its `metrics` key; every metric when RESULTS has
    no scenario.toml); the JSON has them all."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tcpdelay.report.results import write_report

    err = Console(stderr=True)
    with Progress(TextColumn("reading runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:  # no stray line
        task = bar.add_task("runs", total=None)
        doc = write_report(results, out_file,
                           progress=lambda done, total: bar.update(task, completed=done, total=total))
    emit(doc, as_json, _human(doc))


COMMANDS = [report_cmd]
