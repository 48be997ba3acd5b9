"""``tcpdelay reproduce``: one command per paper's reproduction — run its sweeps (resuming), keep
its summaries in the results and compare the tables of its page (docs/experiments/) with them,
or rewrite them in the page named by ``--page``."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from tcpdelay.cli.common import emit, json_option
from tcpdelay.errors import ParameterError
from tcpdelay.reproductions.catalog import BACKENDS, REPO_ROOT, REPRODUCTIONS, SIZES, Reproduction, Sweep


def _reproduction(rid: str) -> Reproduction:
    if rid not in REPRODUCTIONS:
        raise ParameterError(f"no reproduction {rid!r}; one of {', '.join(REPRODUCTIONS)} "
                             "(tcpdelay reproduce --list)")
    return REPRODUCTIONS[rid]


def select(rep: Reproduction, backend: str | None, size: str | None, only: str | None) -> list[Sweep]:
    """The sweeps to run: those the page shows (no ``backend`` nor ``size``), else every sweep of
    that backend and size; with ``only``, of that section. What the reproduction cannot do is a
    :class:`ParameterError` saying what it can."""
    if backend is not None and backend not in rep.backends:
        raise ParameterError(f"{rep.id}: --backend {backend}: it runs only on "
                             f"{' and '.join(rep.backends)}")
    if size is not None and size not in rep.sizes:
        raise ParameterError(f"{rep.id}: --size {size}: it has only the size(s) {', '.join(rep.sizes)}")
    if only is not None and only not in rep.sections:
        raise ParameterError(f"{rep.id}: --only {only}: no such section; one of {', '.join(rep.sections)}")
    if backend is None and size is None:
        chosen = [w for w in rep.sweeps if w.page]
    else:
        chosen = [w for w in rep.sweeps if backend in (None, w.backend) and size in (None, w.size)]
    if not chosen:
        have = ", ".join(dict.fromkeys(f"{w.backend} {w.size}" for w in rep.sweeps))
        raise ParameterError(f"{rep.id}: no sweep on {backend or 'any backend'} at size "
                             f"{size or 'any'} (it has: {have})")
    if only is not None:
        chosen = [w for w in chosen if w.in_section(only)]
        if not chosen:
            raise ParameterError(f"{rep.id}: --only {only}: no sweep of that section on "
                                 f"{backend or 'any backend'} at size {size or 'any'}")
    return chosen


def _scenario(sweep: Sweep):
    if sweep.validate is not None:
        from tcpdelay.experiments.validation.grid import validation_scenario

        return validation_scenario(**sweep.validate)
    from tcpdelay.experiments.scenario import load_scenario

    return load_scenario(sweep.scenario_path())


def plan(sweep: Sweep, out: Path) -> dict:
    """The runs of ``sweep`` in ``out/<result>``: how many, how many complete, how many of those
    to do failed when last tried (``failed.json``; a rerun tries them again), and the estimated
    wall time of those to do (one at a time, as the pages ran them)."""
    from tcpdelay.experiments.sweep import estimate_unit_s, expand, parse_shard, shard_units, units
    from tcpdelay.results.markers import is_failed

    scenario = _scenario(sweep)
    shard = parse_shard(sweep.shard) if sweep.shard else None
    every = shard_units(units(expand(scenario), out / sweep.result), shard)
    todo = [u for u in every if not u.complete]
    per_cell = {u.cell.id: estimate_unit_s(u.cell.scenario, sweep.backend) for u in every}
    return {"section": sweep.section if isinstance(sweep.section, str) else list(sweep.section),
            "scenario": f"experiments/{sweep.scenario}" if sweep.scenario else None,
            "validate": sweep.validate, "shard": sweep.shard, "backend": sweep.backend, "size": sweep.size,
            "out_dir": str(out / sweep.result), "runs": len(every), "complete": len(every) - len(todo),
            "failed": sum(1 for u in todo if is_failed(u.run_dir)),
            "estimate_s": round(sum(per_cell[u.cell.id] for u in todo), 1),
            "all_runs_s": round(sum(per_cell[u.cell.id] for u in every), 1)}


def wall_times(rep: Reproduction) -> dict:
    """Estimated wall time (s) of every run of the reproduction, one at a time, per backend and
    size (from an empty output directory)."""
    out: dict[str, dict[str, float]] = {}
    nowhere = Path("/nonexistent-tcpdelay-reproduce")
    for w in rep.sweeps:
        s = plan(w, nowhere)["all_runs_s"]
        slot = out.setdefault(w.backend, {})
        slot[w.size] = round(slot.get(w.size, 0.0) + s, 1)
    return out


def listing() -> dict:
    return {"reproductions": [
        {"id": r.id, "paper": r.paper, "sections": list(r.sections), "page": f"docs/experiments/{r.page}",
         "scenarios": r.scenarios(), "sizes": list(r.sizes), "backends": list(r.backends),
         "wall_time_s": wall_times(r), "tables": bool(r.tables), "notes": r.notes} for r in REPRODUCTIONS.values()]}


def _hours(s: float) -> str:
    return f"{s / 3600:.1f} h" if s >= 5400 else f"{s / 60:.0f} min" if s >= 90 else f"{s:.0f} s"


def _show_list(doc: dict):
    """Each reproduction: its id (bold), then indented lines broken between phrases at the
    terminal's width (they were one 146-204-column line each), nothing coloured inside a name
    (rich's highlighter coloured the digits of "droptail-5.3")."""
    def show(console: Console) -> None:
        from rich.text import Text

        from tcpdelay.cli.text_layout import phrase_lines

        for r in doc["reproductions"]:
            times = "; ".join(f"{b} {sz} ~{_hours(s)}" for b, per in r["wall_time_s"].items() for sz, s in per.items())
            console.print(Text(r["id"], style="bold"))
            for text in (r["paper"], f"sections {', '.join(r['sections'])}; page {r['page']}; "
                                     f"{len(r['scenarios'])} scenario file(s)",
                         f"wall time (one run at a time): {times}"):
                for line in phrase_lines(text, console.width - 2):
                    console.print("  " + line, markup=False, highlight=False, soft_wrap=True)
    return show


def _run_one(sweep: Sweep, out: Path, console: Console) -> dict:
    """Run (resume) one sweep; its result as the sweep machinery reports it."""
    target = out / sweep.result
    if sweep.validate is not None:
        from tcpdelay.cli.validate import run_validation

        doc = run_validation(target, backend=sweep.backend, console=console, **sweep.validate)
        return doc["sweep"]
    from tcpdelay.cli.experiments import _run_sweep, _runner
    from tcpdelay.experiments.sweep import parse_shard

    scenario = _scenario(sweep)
    runner = _runner(sweep.backend, scenario)
    res = _run_sweep("reproduce", target, scenario, runner, jobs=1, flat=False,
                     shard=parse_shard(sweep.shard) if sweep.shard else None, testbed=sweep.backend == "testbed")
    if res is None:
        raise click.exceptions.Exit(1)
    return res.to_dict()


def _missing(rep: Reproduction, out: Path) -> list[str]:
    """The sweeps the page shows that ``out`` does not hold, each once."""
    return list(dict.fromkeys(w.result for w in rep.sweeps if w.page and not (out / w.result).is_dir()))


def lacking(rep: Reproduction, out: Path, missing: list[str]) -> str:
    """Where the results were looked for and what is not there, in a few words: an ``OUT`` that
    does not exist, or holds none of the sweeps, is named (absolute) with where the committed
    results are, rather than listed sweep by sweep."""
    where = str(out.absolute())
    committed = REPO_ROOT / "results"
    hint = "" if out.absolute() == committed.absolute() or not committed.is_dir() else \
        f"; the committed results are in {committed} (--out {committed})"
    if not out.is_dir():
        return f"no results directory {where}{hint}"
    every = _missing(rep, Path("/nonexistent-tcpdelay-reproduce"))
    if len(missing) == len(every):
        return f"{where} holds none of the {len(every)} sweeps the page shows (e.g. {missing[0]}){hint}"
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return f"{where} lacks {len(missing)} of the {len(every)} sweeps the page shows: {shown}"


def rewrite_page(rep: Reproduction, results: Path, page: Path, write: bool = True) -> dict:
    """The page's tables from ``results``, rewritten in ``page`` when ``write`` (else only
    compared with it): ``{"page", "tables", "changed", "written"}`` (no tables: the
    reproduction's page has none generated from its results; ``changed``: the tables whose text
    differs from the page's)."""
    from tcpdelay.reproductions.page_tables import replace_tables

    if rep.tables is None:
        return {"page": str(page), "tables": [], "changed": [], "written": False}
    tables = rep.tables(results)
    text = page.read_text()
    new, changed = replace_tables(text, tables)
    if write and new != text:
        page.write_text(new)
    return {"page": str(page), "tables": list(tables), "changed": changed, "written": bool(write and changed)}


@click.command("reproduce")
@click.argument("rid", metavar="ID", required=False)
@click.option("--list", "list_", is_flag=True, help="List the reproductions (paper, sections, scenarios, sizes, "
              "estimated wall time per backend).")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help="Run only the sweeps of this backend [default: those the page shows].")
@click.option("--size", type=click.Choice(SIZES), default=None,
              help="reduced (what the page ran) or full (the paper's size) [default: what the page shows].")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="results", show_default=True,
              help="The results directory: each sweep in OUT/<name>, resumed where it stopped (the committed "
                   "results are complete, so rerunning into results/ measures nothing).")
@click.option("--only", default=None, metavar="SECTION", help="Only the sweeps of this section of the paper.")
@click.option("--dry-run", is_flag=True, help="Measure and write nothing: list the sweeps with their runs to do "
              "and an estimate of the time.")
@click.option("--tables", "tables_only", is_flag=True,
              help="Measure nothing: rewrite the page's tables from the results in OUT.")
@click.option("--page", "page_path", type=click.Path(dir_okay=False), default=None,
              help="The page whose tables to rewrite (e.g. docs/experiments/<page>) [default: none: the "
                   "tables are only compared with the repository's page].")
@json_option
def reproduce_cmd(rid, list_, backend, size, out_dir, only, dry_run, tables_only, page_path, as_json):
    """Reproduce a paper: run the sweeps of reproduction ID (resuming), keep its summaries in the
    results and rewrite the tables of its page. `--list` names them all."""
    if list_:
        if rid is not None:
            raise ParameterError("--list takes no ID")
        doc = listing()
        emit(doc, as_json, _show_list(doc))
        return 0
    if rid is None:
        raise ParameterError("give a reproduction ID (tcpdelay reproduce --list names them)")
    rep = _reproduction(rid)
    if dry_run and tables_only:
        raise ParameterError("--dry-run and --tables: choose one")
    sweeps = select(rep, backend, size, only)
    out = Path(out_dir)
    page = Path(page_path) if page_path else rep.page_path
    if not page.is_file():   # before any work: the page is read (and written) only at the end
        raise ParameterError(f"--page: {page_path} does not exist; give a reproduction's page "
                             f"(e.g. a copy of {rep.page_path.name})")
    doc: dict = {"id": rep.id, "paper": rep.paper, "out_dir": str(out), "dry_run": bool(dry_run),
                 "tables_only": bool(tables_only)}
    if tables_only:
        missing = _missing(rep, out)
        if missing and rep.tables is not None:
            raise ParameterError(f"--tables: the page's tables need every sweep it shows: {lacking(rep, out, missing)}")
        doc.update(rewrite_page(rep, out, page, write=page_path is not None))
        emit(doc, as_json, _show_tables(doc))
        return 0
    doc["sweeps"] = [plan(w, out) for w in sweeps]
    doc["estimate_s"] = round(sum(p["estimate_s"] for p in doc["sweeps"]), 1)
    if dry_run:
        emit(doc, as_json, _show_plan(doc))
        return 0
    console = Console(stderr=True)
    for w, p in zip(sweeps, doc["sweeps"]):
        p["result"] = _run_one(w, out, console)
    doc["summaries"] = [str(p) for p in rep.summarize(out, tuple(sweeps))]
    missing = _missing(rep, out)
    if rep.tables is not None and not missing:
        doc.update(rewrite_page(rep, out, page, write=page_path is not None))
    else:
        doc.update({"page": str(page), "tables": [], "changed": [], "written": False,
                    "tables_skipped": lacking(rep, out, missing) if missing else None})
    failed = [f for p in doc["sweeps"] for f in (p["result"].get("failed") or [])]
    emit(doc, as_json, _show_done(doc))
    return 1 if failed else 0


def _show_plan(doc: dict):
    def show(console: Console) -> None:
        console.print(f"reproduce {doc['id']}: {len(doc['sweeps'])} sweep(s) into {doc['out_dir']}, "
                      f"about {_hours(doc['estimate_s'])} of runs to do (one at a time; a rough estimate)")
        for p in doc["sweeps"]:
            what = p["scenario"] or f"tcpdelay validate {p['validate']}"
            console.print(f"  {p['backend']:7} {p['size']:7} {what}{' shard ' + p['shard'] if p['shard'] else ''} "
                          f"-> {p['out_dir']}: {p['runs'] - p['complete']} of {p['runs']} runs to do "
                          f"(~{_hours(p['estimate_s'])})", soft_wrap=True)
    return show


def _show_tables(doc: dict):
    def show(console: Console) -> None:
        if not doc["tables"]:
            console.print(f"{doc['id']}: its page has no tables generated from the results ({doc['page']})")
            return
        differ = f": {', '.join(doc['changed'])}" if doc["changed"] else ""
        if doc["written"] or not doc["changed"]:
            console.print(f"{doc['page']}: {len(doc['tables'])} tables from {doc['out_dir']}, "
                          f"{len(doc['changed'])} changed{differ}", soft_wrap=True)
        else:
            console.print(f"{doc['page']}: {len(doc['tables'])} tables from {doc['out_dir']}, "
                          f"{len(doc['changed'])} differ from the page{differ}; not written (--page "
                          f"{doc['page']} rewrites it)", soft_wrap=True)
    return show


def _show_done(doc: dict):
    def show(console: Console) -> None:
        for p in doc["sweeps"]:
            r = p["result"]
            console.print(f"{p['out_dir']}: {r.get('ran', 0)} runs measured, {r.get('skipped', 0)} already complete, "
                          f"{len(r.get('failed') or [])} failed")
        for s in doc["summaries"]:
            console.print(f"wrote {s}")
        _show_tables(doc)(console)
        if doc.get("tables_skipped"):
            console.print(f"tables not rewritten: {doc['tables_skipped']}")
    return show


COMMANDS = [reproduce_cmd]
