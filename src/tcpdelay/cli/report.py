"""``tcpdelay report``: the tables and plots of a run or sweep directory in one HTML file."""

from __future__ import annotations

import math

import click
from tcpdelay.cli.common import HTML_FORMATS, OutFile, emit, json_option
from tcpdelay.cli.testbed_warning import as_verdict, warn


def _mos(f: dict) -> str:
    return "—" if f["mos"] is None or not math.isfinite(f["mos"]) else f"{f['mos']:.2f}"


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None or not math.isfinite(seconds) else f"{seconds * 1e3:.1f}"


#: The text table's value columns: (metric of the scenario's `metrics` that shows it; header,
#: with the unit of its numbers; value of an aggregated flow).
_COLUMNS = [("loss", "loss %", lambda f: "—" if f["loss_rate"] is None else f"{f['loss_rate'] * 100:.2f}"),
            ("delay", "mean ms", lambda f: _ms(f["delay"]["mean_s"])),
            ("delay", "p95 ms", lambda f: _ms(f["delay"].get("p95_s"))),
            ("delay", "std ms", lambda f: _ms(f["delay"]["std_s"])),
            ("mos", "MOS", _mos)]


def text_table(doc: dict) -> tuple[list[str], list[str], list[list[list[str]]]]:
    """The text table of ``tcpdelay report``: (notes above it, headers, rows grouped by cell).
    A row per cell and media flow, the cell named by :func:`compact_labels` (only the parameters
    that differ between the cells) on its first row; a column whose value is the same on every
    row (the flow, the runs; the parameters every cell shares) is a note instead."""
    from tcpdelay.report.cell_labels import compact_labels, shared_params
    from tcpdelay.results.testbed_error import LATE_MARK, LATE_NOTE

    overrides = [c.get("overrides") or {} for c in doc["cells"]]
    labels = [label + (LATE_MARK if c.get("testbed_late") else "")
              for label, c in zip(compact_labels(overrides), doc["cells"])]
    shown = set(doc["metrics"])  # the scenario's `metrics`
    cols = [(h, fn) for m, h, fn in _COLUMNS if m in shown]
    groups = [[[label if i == 0 else "", f["name"], str(f["runs"]), *(fn(f) for _, fn in cols)]
               for i, f in enumerate(c["flows"])] for label, c in zip(labels, doc["cells"])]
    groups = [g for g in groups if g]
    rows = [r for g in groups for r in g]
    headers = ["cell", "flow", "runs", *(h for h, _ in cols)]
    # (a cell is marked where cells are told apart: with one cell the warning line says it)
    notes = [LATE_NOTE.rstrip(".")] if len(doc["cells"]) > 1 and any(c.get("testbed_late") for c in doc["cells"]) else []
    shared = shared_params(overrides)
    if shared:
        notes.append(f"every cell: {shared}")
    for i in (2, 1, 0):  # runs, flow, cell: a column of one value is a note
        values = {r[i] for r in rows} - ({""} if i == 0 else set())
        if len(values) != 1 or (i == 0 and len(doc["cells"]) > 1):
            continue
        value = next(iter(values))
        if i == 2:
            notes.append(f"{value} run{'s' if value != '1' else ''}" + (" per cell" if len(groups) > 1 else ""))
        elif i == 1:
            notes.append(f"flow {value}")
        headers.pop(i)
        for r in rows:
            r.pop(i)
    return notes, headers, groups


def _human(doc: dict):
    def show(console) -> None:
        from tcpdelay.cli.text_layout import compact_table, needs_wrapping, print_title, print_wrapped, print_written

        print_title(console, f"{doc['name']}: {doc['results']}")
        notes, headers, groups = text_table(doc)
        if groups:
            if notes:
                print_wrapped(console, "; ".join(notes))
            wraps = needs_wrapping(headers, [r for g in groups for r in g], console.width)
            table = compact_table()
            for h in headers:
                numeric = h not in ("cell", "flow")
                table.add_column(h, justify="right" if numeric else "left", no_wrap=numeric, overflow="fold")
            for g in groups:
                for i, r in enumerate(g):  # a blank line between cells when they take several lines
                    table.add_row(*r, end_section=(wraps or len(g) > 1) and i == len(g) - 1)
            console.print(table)
        else:
            print_wrapped(console, "No media flow in these results: the HTML report shows what they measured.")
        r = doc["runs"]
        print_wrapped(console, f"{r['complete']} complete, {r['failed']} failed, {r['incomplete']} incomplete runs")
        print_written(console, "Report", doc["report_path"])
    return show


@click.command("report")
@click.argument("results", type=click.Path(), nargs=-1, required=True)
@click.option("--out", "out_file", type=OutFile(HTML_FORMATS), default=None,
              help="HTML file to write [default: RESULTS/report.html; with several RESULTS: comparison.html].")
@click.option("--label", "labels", multiple=True, metavar="NAME",
              help="Name of a RESULTS directory in a comparison or CSV export: one per directory, in "
                   "order [default: the directories' names].")
@click.option("--csv", "csv_dir", type=click.Path(), default=None, metavar="DIR",
              help="Write the tables as CSV into DIR (packets.csv, flows.csv, cells.csv) instead of the HTML "
                   "(with --out too: both).")
@json_option
def report_cmd(results, out_file, labels, csv_dir, as_json):
    """Write one self-contained HTML report (tables, embedded plots) of RESULTS: a run directory
    (tcpdelay run), one run, or a sweep directory (tcpdelay sweep). Repetitions of a cell are
    joined: delay statistics over their pooled packets, per-run figures averaged. The tables and
    figures show the metrics the scenario lists (its `metrics` key; every metric when RESULTS has
    no scenario.toml); the JSON has them all. With several RESULTS, one page compares them: a
    figure per metric with a series per directory and a table with a column per directory, cells
    matched by their parameters (docs/cli.md). --csv DIR exports the per-packet, per-flow and
    per-cell tables as CSV instead (with --out FILE as well as the HTML)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tcpdelay.errors import ParameterError
    from tcpdelay.report.results import write_report

    if labels and len(results) == 1 and csv_dir is None:
        raise ParameterError("--label names the directories of a comparison (several RESULTS) or of a "
                             "--csv export; one report needs none")
    err = Console(stderr=True)
    with Progress(TextColumn("reading runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as bar:  # no stray line
        task = bar.add_task("runs", total=None)

        def progress(done, total):
            bar.update(task, completed=done, total=total)
        csv_doc = None
        if csv_dir is not None:
            from tcpdelay.report.csv_export import export_csv

            doc = csv_doc = export_csv(results, csv_dir, labels or None, progress=progress)
            show = _human_csv(doc)
        if csv_dir is None or out_file is not None:  # --csv alone: the CSV instead of the HTML
            if len(results) > 1:
                from tcpdelay.report.compare import write_comparison

                doc = write_comparison(results, out_file or "comparison.html", labels or None, progress=progress)
                show = _human_compare(doc)
            else:
                doc = write_report(results[0], out_file, progress=progress)
                show = _human(doc)
            if csv_doc is not None:   # both: the HTML's JSON with the CSV's under "csv"
                doc["csv"] = csv_doc
                show = _both(show, _human_csv(csv_doc))
    emit(doc, as_json, show)
    if "cells" in doc and "testbed_error" in doc:     # one report (a comparison has its own pages)
        warn("report", [as_verdict(r["testbed_error"]) for c in doc["cells"]
                        for r in c["runs"] if r.get("testbed_error")])


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


def _both(first, second):
    def show(console) -> None:
        first(console)
        second(console)
    return show


def _human_csv(doc: dict):
    def show(console) -> None:
        for f in doc["files"].values():
            console.print(f"{f['rows']} rows: [bold]{f['path']}[/bold]")
    return show


COMMANDS = [report_cmd]
