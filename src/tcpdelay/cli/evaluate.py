"""``tcpdelay evaluate``: the main job (what ``make run`` runs) — writes out/report.html: the
parts computed by :mod:`tcpdelay.experiments.evaluate`, drawn by
:class:`tcpdelay.report.evaluation_page.EvaluationPage`.

While it runs it says what it is doing on stderr (so ``--json`` keeps stdout to the JSON): on a
terminal a live line with the current part and step, and one line per finished part; elsewhere
(a CI log, a pipe) plain lines for every start, step and end. It ends with where the report is
and how to open it.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from tcpdelay.cli.common import emit, json_option
from tcpdelay.model.delay.stacks import DEFAULT_STACK, STACKS


def _check_duration(ctx, param, value):
    if value is None or value == 0 or 1 <= value <= 3600:
        return value
    raise click.BadParameter(f"{value:g} is not allowed: give 0 (leave the check out) or 1 to 3600 seconds")


def open_hint(path: str) -> str:
    """How to open ``path`` here: a command when the desktop has one, and its file:// URL."""
    url = Path(path).as_uri()
    opener = "open" if sys.platform == "darwin" else ("xdg-open" if shutil.which("xdg-open") else None)
    return f"open it with: {opener} {path}   (or {url} in a browser)" if opener else f"open {url} in a browser"


class _Progress:
    """Shows :class:`tcpdelay.experiments.evaluate.PartEvent` on a console (stderr); a part's step
    is said once, though the part computes and then draws the same thing (the advice's paths)."""

    def __init__(self, console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = console
        self.live = console.is_terminal and not console.is_dumb_terminal
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=True, disable=not self.live)
        self.task = None
        self.said: set[tuple[int, str]] = set()

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def _line(self, text: str) -> None:
        from rich.markup import escape

        self.console.print(escape(text), soft_wrap=True, highlight=False)

    def __call__(self, ev) -> None:
        head = f"[{ev.index}/{ev.total}] {ev.name}"
        if self.task is None:
            self.task = self.bar.add_task(head, total=ev.total)
        if ev.kind == "start":
            self.bar.update(self.task, description=f"{head}: {ev.title}")
            if not self.live:
                self._line(f"{head}: {ev.title} …")
        elif ev.kind == "step":
            if (ev.index, ev.text) in self.said:
                return
            self.said.add((ev.index, ev.text))
            self.bar.update(self.task, description=f"{head}: {ev.text}")
            if not self.live:
                self._line(f"{head}: {ev.text}")
        else:
            self.bar.update(self.task, advance=1)
            self._line(f"{head}: done in {ev.elapsed_s:.1f} s" + (f" — {ev.text}" if ev.text else ""))


@click.command("evaluate")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="out", show_default=True,
              help="Directory for report.html.")
@click.option("--check-duration-s", type=float, default=None, callback=_check_duration,
              help="Seconds of VoIP per point of the measured check on the testbed (1 to 3600; 0 leaves "
                   "the check out) [default: 10].")
@click.option("--stack", type=click.Choice(list(STACKS)), default=DEFAULT_STACK, show_default=True,
              help="Whose loss recovery the delay model follows (regions, playout, advice): linux, "
                   "classic or paper (docs/models/delay.md).")
@json_option
def evaluate_cmd(out_dir, check_duration_s, stack, as_json):
    """Evaluate the models over the default paths (throughput, latency, working regions, playout
    delay), measure a few points on the testbed when it can run here, and write one HTML report.
    Progress goes to stderr; the last line says where the report is and how to open it."""
    from rich.console import Console

    from tcpdelay.experiments.evaluate import evaluate
    from tcpdelay.report.evaluation_page import EvaluationPage

    err = Console(stderr=True)
    with _Progress(err) as progress:
        result = evaluate(out_dir, progress, page=EvaluationPage(), check_duration_s=check_duration_s,
                          stack=stack)
    path = result["report_path"]
    hint = f"Report written to {path}\n{open_hint(path)}"
    if as_json:
        emit(result, True, lambda console: None)
        err.print(hint, soft_wrap=True, highlight=False, markup=False)
    else:
        emit(result, False, lambda console: console.print(hint, soft_wrap=True, highlight=False, markup=False))


COMMANDS = [evaluate_cmd]
