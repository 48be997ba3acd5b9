"""``tcpdelay run`` and ``tcpdelay sweep``: run a scenario file on the testbed (or simulate it in
ns-3, ``--backend ns3``), once or over its grid."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from tcpdelay.cli.common import emit, fmt_s, json_option
from tcpdelay.cli.testbed_warning import as_verdict, describe, warn
from tcpdelay.experiments.scenario import Scenario, load_scenario
from tcpdelay.experiments.tiny import tiny_form
from tcpdelay.experiments.sweep import (
    ENGINES, ORDERS, SweepResult, default_jobs, estimate_unit_s, estimate_wall_s, expand, ordered, parse_shard,
    run_sweep, shard_units, units,
)
from tcpdelay.results import markers


def _default_out(path: str, scenario: Scenario) -> Path:
    return Path("out") / (scenario.name or Path(path).stem)


BACKEND_CHOICES = ("testbed", "ns3")


def backend_option(f):
    return click.option("--backend", type=click.Choice(BACKEND_CHOICES), default="testbed", show_default=True,
                        help="Where the runs happen: the namespace testbed (real Linux TCP, real time) or an "
                             "ns-3 simulation of the same scenario (docs/ns3.md).")(f)


def _check_scenario(backend: str, scenario: Scenario) -> None:
    """Refuse in one line everything of ``scenario`` the backend cannot run (every cell, every
    problem at once: :func:`tcpdelay.experiments.backend_check.check_scenario`, which the dry run
    calls too), and say what it only approximates."""
    from tcpdelay.experiments.backend_check import check_scenario

    for note in check_scenario(scenario, backend):
        click.echo(f"tcpdelay: note: backend {backend} approximates: {note}", err=True)


def _runner(backend: str = "testbed", scenario: Scenario | None = None, *, here: bool = True):
    """The backend's cell runner, after checking that it can run here (``here``; not when the
    runs happen on other nodes: each node checks its own) and that it can run every cell of
    ``scenario`` (:func:`_check_scenario`; before anything is written)."""
    import functools

    from tcpdelay.experiments.backends import get_backend
    from tcpdelay.experiments.run import run_scenario

    runner = get_backend(backend)
    if here:
        runner.check()
    if scenario is not None:
        _check_scenario(backend, scenario)
    return run_scenario if backend == "testbed" else functools.partial(run_scenario, backend=backend)


def _run_sweep(command: str, out: Path, scenario: Scenario, runner, *, jobs: int, flat: bool,
               **options) -> SweepResult | None:
    """:func:`run_sweep`; an output directory that cannot be written (full disk, read-only)
    before any run starts is one line on stderr and None (exit status 1). A run that fails on
    its own (the disk fills up during it) is recorded as failed and the others go on."""
    try:
        return run_sweep(scenario, out, runner, jobs=jobs, console=Console(stderr=True), flat=flat, **options)
    except OSError as err:
        where = err.filename or out
        click.echo(f"tcpdelay {command}: error: --out {out}: cannot write {where}: {err.strerror or err}", err=True)
        return None


def _unit_rows(scenario: Scenario, out: Path, flat: bool, failed: list[dict] = (),
               shard: tuple[int, int] | None = None) -> list[dict]:
    """One row per run (of the shard, with one): complete, failed (in this invocation, or by its
    failed.json) or missing. A run that failed now is "failed" even when its failed.json could
    not be written."""
    rows = []
    failed_now = {f["run_dir"]: f for f in failed}
    cells = expand(scenario.model_copy(update={"sweep": {}}) if flat else scenario)
    for u in shard_units(units(cells, out, flat=flat), shard):
        row = {"cell_id": u.cell.id, "overrides": u.cell.overrides, "seed": u.seed, "run_dir": str(u.run_dir)}
        marks = markers.read_status(u.run_dir)
        if marks.status == "complete":
            row["status"] = "complete"
            row["summary"] = marks.summary
            row["testbed_error"] = describe(u.run_dir)
        elif str(u.run_dir) in failed_now:
            row["status"] = "failed"
            row["error"] = failed_now[str(u.run_dir)]["error"]
            row["failed_marker"] = markers.is_failed(u.run_dir)
        elif marks.status == "failed":
            row["status"] = "failed"
            row["error"] = marks.error
        else:
            row["status"] = "missing"
        rows.append(row)
    return rows


def _result(command: str, path: str, scenario: Scenario, res: SweepResult, jobs: int, flat: bool) -> dict:
    return {"command": command, "scenario_file": path, "scenario": scenario.name, **res.to_dict(),
            "jobs": jobs, "runs": _unit_rows(scenario, res.out_dir, flat, res.failed, res.shard)}


def _warn_late(command: str, doc: dict) -> None:
    """The one warning line when the testbed was late in any complete run (this invocation's or
    an earlier one's in OUT)."""
    warn(command, [as_verdict(r["testbed_error"]) for r in doc["runs"] if r.get("testbed_error")])


def _human(res: dict):
    def show(console: Console) -> None:
        from tcpdelay.cli.text_layout import compact_table, print_title, print_wrapped
        from tcpdelay.report.cell_labels import compact_labels
        from tcpdelay.results.testbed_error import LATE_MARK, LATE_NOTE

        flat = res["command"] == "run"
        print_title(console, f"{res['command']} {res['scenario'] or res['scenario_file']}: {res['out_dir']}")
        print_wrapped(console, "packets: media packets sent / received; delay: mean / p95 in ms of each "
                               "media flow; drops: the link's, per direction; run directories: "
                               + ("OUT/seed-<seed>/" if flat else "OUT/cells/<cell_id>/seed-<seed>/ (--json has them)"))
        table = compact_table()
        cols = ["seed", "status", "packets", "delay", "drops"]
        if not flat:
            cols = ["cell"] + cols
        for col in cols:
            table.add_column(col, no_wrap=col in ("seed", "status"), overflow="fold")
        keys = {r["cell_id"]: r["overrides"] for r in res["runs"]}
        late = {r["cell_id"] for r in res["runs"] if (r.get("testbed_error") or {}).get("late")}
        labels = dict(zip(keys, compact_labels(list(keys.values()))))
        for r in res["runs"]:
            s = r.get("summary") or {}
            pk = f"{s.get('packets_sent', '-')} / {s.get('packets_received', '-')}" if s else (r.get("error") or "")
            drops = s.get("link_drops") or {}
            dr = ", ".join(f"{d.replace('_to_', '→')} {v.get('total')}" for d, v in drops.items() if v) if drops else ""
            status = {"complete": "[green]complete[/green]", "failed": "[red]failed[/red]"}.get(r["status"], r["status"])
            delays = ", ".join(f"{f.get('name') or f['flow_id']} {f['delay_mean_s'] * 1e3:.1f} / "
                               + ("—" if f.get("delay_p95_s") is None else f"{f['delay_p95_s'] * 1e3:.1f}")
                               for f in s.get("flows", []) if f.get("delay_mean_s") is not None)
            row = [str(r["seed"]), status, pk, delays, dr]
            if not flat:
                row = [labels[r["cell_id"]] + (LATE_MARK if r["cell_id"] in late else "")] + row
            table.add_row(*row)
        console.print(table)
        if late and not flat:
            print_wrapped(console, LATE_NOTE)
        console.print(f"{res['ran']} ran, {res['skipped']} already complete, {len(res['failed'])} failed, "
                      f"in {fmt_s(res['wall_s'])}")
        for f in res["failed"]:
            console.print(f"[red]failed[/red] {f['label']} seed {f['seed']}: {f['error']}")
    return show


@click.command("run")
@click.argument("scenario_file", type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output directory [default: out/<scenario name>]; one seed-<s>/ run directory per repetition.")
@click.option("--tiny-s", type=click.FloatRange(min=0.5, max=600), default=None,
              help="Run the scenario's tiny form instead: its first sweep cell, one repetition, "
                   "every start, stop and outage scaled into this many seconds, transfers capped "
                   "(a quick check; see docs/experiments/README.md).")
@click.option("--dry-run", is_flag=True,
              help="Run nothing, write nothing: refuse what the backend cannot run, as the run would, and list "
                   "the repetitions (status planned, or complete where OUT has them) with an estimate of the time.")
@backend_option
@json_option
def run_cmd(scenario_file, out_dir, tiny_s, dry_run, backend, as_json):
    """Run SCENARIO_FILE (TOML; docs/experiments/README.md) on the emulation testbed: each
    repetition once, its [sweep] ignored. Writes per-packet records (Parquet), per-flow
    summaries, the scenario and the environment into OUT/seed-<s>/ as it goes. A rerun skips
    the repetitions already complete. The testbed needs root and /dev/net/tun; ns-3 neither."""
    scenario = load_scenario(scenario_file, sweep=tiny_s is not None)  # run ignores [sweep]
    if tiny_s is not None:
        scenario = tiny_form(scenario, tiny_s)
    scenario = scenario.model_copy(update={"sweep": {}})             # what run runs: one cell
    out = Path(out_dir) if out_dir else _default_out(scenario_file, scenario)
    if dry_run:
        _check_scenario(backend, scenario)        # refuses exactly what the run would refuse
        return _dry_run("run", scenario_file, scenario, out, backend, as_json)
    runner = _runner(backend, scenario)
    res = _run_sweep("run", out, scenario, runner, jobs=1, flat=True)
    if res is None:
        return 1
    doc = _result("run", scenario_file, scenario, res, 1, True)
    emit(doc, as_json, _human(doc))
    _warn_late("run", doc)
    return 1 if res.failed else 0


@click.command("sweep")
@click.argument("scenario_file", type=click.Path())
@click.argument("merge_dirs", nargs=-1, type=click.Path(file_okay=False), metavar="")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output directory [default: out/<scenario name>]; cells/<cell id>/seed-<s>/ per run.")
@click.option("--jobs", type=click.IntRange(min=1, max=64), default=None,
              help="Runs at once, each on its own testbed [default: a quarter of the CPU cores, at least 1]. "
                   "Emulation is real time: more jobs than the machine can serve distort the measurement.")
@click.option("--shard", "shard_text", default=None, metavar="I/N",
              help="Run only the I-th of N disjoint parts of the runs (1 <= I <= N), for batch schedulers: "
                   "every N-th run of the grid, from the I-th; give each shard its own --out.")
@click.option("--order", type=click.Choice(ORDERS), default="grid", show_default=True,
              help="Run order: the grid's, or shuffled (--order-seed) so that a drift of the machine over "
                   "time does not line up with a swept parameter.")
@click.option("--order-seed", type=int, default=1, show_default=True, help="The shuffle's seed with --order random.")
@click.option("--dry-run", is_flag=True,
              help="Run nothing, write nothing: list the runs (status planned, or complete where OUT has them) "
                   "and estimate the wall time on --nodes nodes.")
@click.option("--nodes", type=click.IntRange(min=1, max=100_000), default=1, show_default=True,
              help="With --dry-run: nodes to estimate the wall time for (each running --jobs runs at once).")
@click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
              help="What runs the units: this machine (--jobs at once), or Ray (each unit a task on a "
                   "node of the cluster at --address, its files shipped back; docs/scale-out.md).")
@click.option("--address", default=None, metavar="ADDR",
              help="With --engine ray: the cluster to join (auto, HOST:PORT or ray://HOST:PORT) "
                   "[default: start Ray on this machine, with --jobs testbed slots].")
@backend_option
@json_option
def sweep_cmd(scenario_file, merge_dirs, out_dir, jobs, shard_text, order, order_seed, dry_run, nodes, engine,
              address, backend, as_json):
    """Run every cell of SCENARIO_FILE's [sweep] grid, each repetition once, with a progress
    bar. Cells and runs already complete in OUT are skipped, so an interrupted sweep resumes
    where it stopped. The testbed needs root and /dev/net/tun; ns-3 neither.

    `tcpdelay sweep merge DIR... --out OUT` merges sweep directories of one scenario (the
    shards of --shard, run apart) into OUT, laid out as if run in one place."""
    if scenario_file == "merge":
        return _merge(merge_dirs, out_dir, as_json)
    if merge_dirs:
        raise click.UsageError(f"unexpected extra arguments {' '.join(merge_dirs)} (one SCENARIO_FILE; "
                               "to merge sweep directories: tcpdelay sweep merge DIR... --out OUT)")
    if Path(scenario_file).is_dir():
        raise click.UsageError(f"SCENARIO_FILE: {scenario_file} is a directory, not a scenario file")
    shard = parse_shard(shard_text) if shard_text is not None else None
    if address is not None and engine != "ray":
        raise click.UsageError("--address: only with --engine ray")
    if engine == "ray":
        from tcpdelay.experiments.ray_engine import check_address

        check_address(address)
    scenario = load_scenario(scenario_file)
    out = Path(out_dir) if out_dir else _default_out(scenario_file, scenario)
    jobs = jobs or (default_jobs() if backend == "testbed" else 1)
    if dry_run:
        _check_scenario(backend, scenario)        # refuses exactly what the sweep would refuse
        return _dry_run("sweep", scenario_file, scenario, out, backend, as_json, jobs=jobs, nodes=nodes, shard=shard,
                        order=order, order_seed=order_seed, engine=engine)
    runner = _runner(backend, scenario, here=engine == "local" or address is None)
    res = _run_sweep("sweep", out, scenario, runner, jobs=jobs, flat=False, shard=shard, order=order,
                     order_seed=order_seed, engine=engine, address=address, testbed=backend == "testbed")
    if res is None:
        return 1
    doc = {**_result("sweep", scenario_file, scenario, res, jobs, False), "engine": engine}
    emit(doc, as_json, _human(doc))
    _warn_late("sweep", doc)
    return 1 if res.failed else 0


def _hours(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 5400 else f"{s / 60:.0f} min" if s >= 90 else f"{s:.0f} s"


def _dry_run(command, path, scenario, out, backend, as_json, *, jobs=1, nodes=1, shard=None, order="grid",
             order_seed=1, engine=None) -> int:
    """The command's usual JSON, every run ``planned`` (or ``complete`` where OUT has it), and an
    estimate of the wall time: the runs to do, ``jobs`` at a time on each of ``nodes`` nodes
    (``run``: its repetitions one after another, in OUT/seed-<s>/)."""
    import math

    flat = command == "run"
    cells = expand(scenario)
    all_units = shard_units(units(cells, out, flat=flat), shard)
    todo = ordered([u for u in all_units if not u.complete], order, order_seed)
    # rough estimates, to the millisecond (a sum of a thousand runs has no business showing 1e-13 s)
    per_unit = {u.cell.id: round(estimate_unit_s(u.cell.scenario, backend), 3) for u in todo}
    busy_s = round(sum(per_unit[u.cell.id] for u in todo), 3)
    wall_s = round(estimate_wall_s([per_unit[u.cell.id] for u in todo], jobs * nodes), 3)
    runs = [{"cell_id": u.cell.id, "overrides": u.cell.overrides, "seed": u.seed, "run_dir": str(u.run_dir),
             "status": "planned", "estimate_s": per_unit[u.cell.id]} for u in todo]
    runs += [{"cell_id": u.cell.id, "overrides": u.cell.overrides, "seed": u.seed, "run_dir": str(u.run_dir),
              "status": "complete"} for u in all_units if u.complete]
    doc = {"command": command, "dry_run": True, "scenario_file": path, "scenario": scenario.name, "out_dir": str(out),
           "cells": len(cells), "units": len(all_units), "ran": 0, "skipped": len(all_units) - len(todo),
           "failed": [], "wall_s": 0.0, "shard": None if shard is None else f"{shard[0]}/{shard[1]}", "jobs": jobs,
           "backend": backend, **({} if flat else {"engine": engine}), "nodes": nodes,
           "estimate": {"runs": len(todo), "busy_s": busy_s, "wall_s": wall_s,
                        "per_node_runs": math.ceil(len(todo) / nodes)},
           "runs": runs}

    def show(console: Console) -> None:
        where = f"one after another ({backend})" if flat else f"order {order}; on {nodes} node(s) x {jobs} at a time ({backend})"
        console.print(f"{command} {scenario.name or path}: {len(todo)} runs to do of {len(all_units)}"
                      + (f" (shard {doc['shard']})" if shard else "") + f", {where}: about {_hours(wall_s)} "
                      f"({_hours(busy_s)} of runs; a rough estimate: docs/cli.md)")
        for r in runs[:20]:
            console.print(f"  {r['status']:8} seed {r['seed']}  {' '.join(f'{k}={v}' for k, v in r['overrides'].items()) or '-'}")
        if len(runs) > 20:
            console.print(f"  ... and {len(runs) - 20} more (--json lists them all)")
    emit(doc, as_json, show)
    return 0


def _merge(dirs, out_dir, as_json) -> int:
    from tcpdelay.errors import ParameterError
    from tcpdelay.results.merge import merge

    if not out_dir:
        raise ParameterError("sweep merge: give --out (the directory to merge into)")
    res = merge(list(dirs), out_dir).to_dict()

    def show(console: Console) -> None:
        console.print(f"merged {len(res['sources'])} directories into {res['out_dir']}: {res['copied']} runs copied, "
                      f"{res['already_complete']} already there, {res['not_complete']} of {res['runs']} complete nowhere")
        for c in res["conflicts"]:
            console.print(f"[yellow]conflict[/yellow] {c}")
    emit({"command": "sweep merge", **res}, as_json, show)
    return 0


COMMANDS = [run_cmd, sweep_cmd]
