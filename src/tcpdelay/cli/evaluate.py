"""``tcpdelay evaluate``: the main job (what ``make run`` runs) — writes out/report.html."""

from __future__ import annotations

import click

from tcpdelay.cli.common import emit, json_option


@click.command("evaluate")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="out", show_default=True,
              help="Directory for report.html.")
@json_option
def evaluate_cmd(out_dir, as_json):
    """Evaluate the models over the default paths and write an HTML report."""
    from rich.progress import Progress, SpinnerColumn, TextColumn

    from tcpdelay.experiments.evaluate import PARTS, evaluate

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), transient=True,
                  disable=as_json) as bar:
        task = bar.add_task("evaluating", total=len(PARTS))

        def progress(name):
            bar.update(task, description=f"evaluating: {name}", advance=1)

        result = evaluate(out_dir, progress)

    emit(result, as_json, lambda console: console.print(f"Report written to [bold]{result['report_path']}[/bold]"))


COMMANDS = [evaluate_cmd]
