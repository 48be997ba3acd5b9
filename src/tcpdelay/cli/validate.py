"""``tcpdelay validate``: the delay model against real Linux TCP (Brosh et al. §5.1)."""

from __future__ import annotations

import os
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from tcpdelay.cli.common import FiniteFloatRange, emit, json_option
from tcpdelay.cli.testbed_warning import as_verdict, warn
from tcpdelay.results.testbed_error import LATE_MARK, LATE_NOTE


def _stack_cell(p: dict, stack: str, stat: str) -> str:
    """The ``stack`` model's ``stat`` at a point with its relative error, as the table shows it."""
    from tcpdelay.experiments.validation.table import error_text, ms_text

    mod, err = p.get(f"model_{stack}") or {}, p.get(f"relative_error_{stack}") or {}
    if mod.get("unstable"):
        return "unstable"
    return f"{ms_text(mod.get(stat))} ({error_text(err.get(stat))})"


def _warn_late(doc: dict) -> None:
    """The one warning line when the testbed was itself late in any run of any point."""
    warn("validate", [as_verdict(r) for p in doc["points"] for r in (p.get("testbed_error") or {}).get("runs") or []])


def _late(point: dict) -> bool:
    """Whether the testbed was itself late in a run of the point (docs/testbed.md)."""
    return bool(((point.get("testbed_error") or {}).get("worst") or {}).get("late"))


def _human(doc: dict, model_stack: str):
    def show(console: Console) -> None:
        from tcpdelay.experiments.validation import table_rows

        table = Table(title=f"model vs Linux TCP, Brosh et al. §5.1 ({doc['size']} size)", title_justify="left")
        extra = model_stack != "paper"
        cols = ["point", "mean ms: measured / paper model (rel. err)", "p95 ms: ditto", "std ms: ditto"]
        if extra:
            cols += [f"mean ms: {model_stack} model (rel. err)", f"p95 ms: {model_stack} model"]
        for col in cols:
            table.add_column(col)
        for p, row in zip(doc["points"], table_rows(doc["points"])):
            point = f"{row[0]} {row[1]} {row[2]} ms {row[3]} %" + (LATE_MARK if _late(p) else "")
            cells = [f"{row[i]} / {row[i + 1]} ({row[i + 2]})" for i in (5, 9, 12)]
            if extra:
                cells += [_stack_cell(p, model_stack, "mean_s"), _stack_cell(p, model_stack, "p95_s")]
            table.add_row(point, *cells)
        console.print(table)
        if any(_late(p) for p in doc["points"]):
            console.print(LATE_NOTE, highlight=False)
        for c in doc.get("claims") or []:
            err = c["worst_relative_error"]
            console.print(f"paper's claim {c['profile']} RTT {c['rtt_s'] * 1e3:g} ms up to {c['max_loss'] * 100:g} % "
                          f"(|err| ≤ {c['bound'] * 100:g} %) on {c['stack']}: worst {err * 100:+.0f} % -> "
                          + ("[green]holds[/green]" if c["holds"] else "[red]does not hold[/red]"))
        sw = doc.get("sweep") or {}
        failed = sw.get("failed") or []
        console.print(f"{sw.get('ran', 0)} runs measured, {sw.get('skipped', 0)} already complete, "
                      f"{len(failed)} failed; report: [bold]{doc['report_path']}[/bold]")
        for f in failed:
            console.print(f"[red]failed[/red] {f['label']} seed {f['seed']}: {f['error']}")
    return show


def run_validation(out_dir: str | os.PathLike, **options: Any) -> dict:
    """The validation job as ``tcpdelay validate`` runs it:
    :func:`tcpdelay.experiments.validation.run_validation` with its page, ``validation.html``,
    written by :func:`tcpdelay.report.validation_page.write_validation_page`."""
    from tcpdelay.experiments.validation import run_validation as job
    from tcpdelay.report.validation_page import write_validation_page

    return job(out_dir, page=write_validation_page, **options)


def evaluate_validation(out_dir: str | os.PathLike, **options: Any) -> dict:
    """The comparison without measuring, with its page (as :func:`run_validation`)."""
    from tcpdelay.experiments.validation import evaluate_validation as job
    from tcpdelay.report.validation_page import write_validation_page

    return job(out_dir, page=write_validation_page, **options)


@click.command("validate")
@click.option("--full", is_flag=True,
              help="The paper's size: voip and video x 2 stacks x RTT 20/100/300 ms x loss "
                   "0.1-10 %, 5 min x 10 runs per point (about 75 hours). Default: the reduced "
                   "size (RTT 100 ms, loss 0.5/1/2 %, one 20 s run per point: ~5 minutes).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output directory [default: out/validate-reduced or out/validate-full]. "
                   "Rerunning resumes: points already measured there are kept.")
@click.option("--jobs", type=click.IntRange(min=1, max=64), default=None,
              help="Runs at once, each on its own testbed [default: a quarter of the CPU cores, at least 1].")
@click.option("--duration-s", type=FiniteFloatRange(min=1, max=3600), default=None,
              help="Length of each run instead of the size's (20 s reduced, 300 s full).")
@click.option("--repetitions", type=click.IntRange(min=1, max=100), default=None,
              help="Runs per point instead of the size's (1 reduced, 10 full).")
@click.option("--rtt-s", "rtts_s", type=FiniteFloatRange(min=0.001, max=2.0), multiple=True,
              help="Only these RTTs (repeat the option) instead of the size's.")
@click.option("--loss", "losses", type=FiniteFloatRange(min=0.0, max=1.0, min_open=True, max_open=True),
              multiple=True, help="Only these drop probabilities (repeat the option) instead of the size's.")
@click.option("--profile", "profiles", type=click.Choice(["voip", "video"]), multiple=True,
              help="Only these media profiles [default: both].")
@click.option("--stack", "stacks", type=click.Choice(["newreno-2008", "linux-default"]), multiple=True,
              help="Only these TCP presets [default: both].")
@click.option("--backend", type=click.Choice(["testbed", "ns3"]), default="testbed", show_default=True,
              help="Measure on the namespace testbed or simulate in ns-3 (docs/ns3.md; its stack is "
                   "newreno-2008 only: ns-3 has no RACK/TLP).")
@click.option("--model-stack", type=click.Choice(["linux", "classic", "paper"]), default=None,
              help="Which of the delay model's stacks the table sets beside the paper's chain "
                   "[default: linux on the testbed, classic in ns-3]; validation.json holds every "
                   "stack (model_linux, model_classic; model is the paper's).")
@click.option("--host-kernel", type=click.Choice(["debian-6.1"]), default=None,
              help="Run each sender on a QEMU guest booting this reference kernel (testbed only; "
                   "docs/testbed.md): newreno-2008 there has RACK really off, the second ground "
                   "truth of the classic stack beside ns-3.")
@json_option
def validate_cmd(full, out_dir, jobs, duration_s, repetitions, rtts_s, losses, profiles, stacks, backend,
                 model_stack, host_kernel, as_json):
    """Measure CBR over real Linux TCP with configured random drops on the testbed and set it
    against the delay model (Brosh et al. §5.1, Figs 5, 8, 11): mean, 95th percentile and
    standard deviation of the delay, with the relative error, in OUT/validation.html and
    OUT/validation.json. The testbed needs root and /dev/net/tun; with --backend ns3 the same grid
    is simulated instead."""
    from tcpdelay.experiments.sweep import default_jobs

    if backend == "ns3" and not stacks:
        stacks = ("newreno-2008",)   # linux-default needs RACK and TLP, which ns-3 3.44 lacks
    grid = {k: v for k, v in (("rtts_s", rtts_s), ("losses", losses), ("profiles", profiles),
                              ("stacks", stacks), ("host_kernel", host_kernel)) if v}
    size = "full" if full else "reduced"
    out = out_dir or (f"out/validate-{size}" + ("-ns3" if backend == "ns3" else ""))
    jobs = jobs or (default_jobs() if backend == "testbed" else max(1, os.cpu_count() or 1))
    doc = run_validation(out, full=full, jobs=jobs, duration_s=duration_s, repetitions=repetitions,
                         grid=grid or None, console=Console(stderr=True), backend=backend)
    emit(doc, as_json, _human(doc, model_stack or ("classic" if backend == "ns3" else "linux")))
    _warn_late(doc)
    return 1 if (doc.get("sweep") or {}).get("failed") else 0


COMMANDS = [validate_cmd]
