"""``tcpdelay report``: the tables and plots of a run or sweep directory in one HTML file."""

from __future__ import annotations

import math

import click
from rich.table import Table

from tcpdelay.cli.common import emit, fmt_s, json_option


def _human(doc: dict):
    def show(console) -> None:
        table = Table(title=f"{doc['name']}: {doc['results']}", title_justify="left")
        for col in ("parameters", "flow", "runs", "loss", "mean", "p95", "std", "MOS"):
            table.add_column(col)
        for c in doc["cells"]:
            for f in c["flows"]:
                d = f["delay"]
                loss = f["loss_rate"]
                table.add_row(c["label"], f["name"], str(f["runs"]),
                              "—" if loss is None else f"{loss * 100:.2f} %",
                              fmt_s(d["mean_s"]), fmt_s(d.get("p95_s")), fmt_s(d["std_s"]),
                              "—" if f["mos"] is None or not math.isfinite(f["mos"]) else f"{f['mos']:.2f}")
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
    joined: delay statistics over their pooled packets, per-run figures averaged."""
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
