"""Sweeps: a scenario's parameter grid expanded into cells, each run once per seed, resumable.

Layout of an output directory (:mod:`tcpdelay.results.layout` names every file)::

    OUT/sweep.json                      the cells (id, overrides) and seeds, written first
    OUT/scenario.toml                   the scenario as given (with its [sweep])
    OUT/cells/<cell_id>/cell.json       the cell's overrides
    OUT/cells/<cell_id>/scenario.toml   the cell's scenario (overrides applied, no sweep)
    OUT/cells/<cell_id>/seed-<s>/       one run: records, run.json, ..., packets.parquet (the
                                        records joined, in one small file) and, written LAST,
                                        complete.json (or failed.json)

A *cell* is one point of the grid; its ``cell_id`` is a hash of everything in its scenario that
changes what is measured (path, flows, cross traffic, duration; not the name, description,
metrics to compute, repetitions or seeds; a trace file by its content), so editing the scenario
gives new ids and never mixes old results with new, while adding repetitions or seeds reuses the
runs already made. A *unit* is one cell run with one seed. A rerun skips every unit with
``complete.json``; a unit directory without it (interrupted, or failed) is removed and run again.
``complete.json`` and ``packets.parquet`` are what a committed result keeps (results/.gitignore
leaves out the record parts), so a fresh clone reopens every run; to measure again, sweep into
another directory.

Units run one at a time, or ``jobs`` at once in separate processes (each with its own testbed;
emulation is real time, so more jobs than the machine's cores can serve distorts the
measurement: :func:`default_jobs` is a quarter of the cores, at least one).
"""

from __future__ import annotations

import concurrent.futures as cf
import fcntl
import functools
import hashlib
import inspect
import json
import multiprocessing
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from tcpdelay.errors import EnvironmentNotSupported, ParameterError
from tcpdelay.experiments.scenario import Scenario, cell_scenario, describe, dump_scenario, grid
from tcpdelay.experiments.unit import CellRunner, run_unit
from tcpdelay.atomic_file import write_text_atomic
from tcpdelay.jsonio import write_json
from tcpdelay.results import layout, markers
from tcpdelay.results.version import stamp, version_of

# Keys of a scenario that do not change what a run measures.
_NOT_HASHED = ("name", "description", "metrics", "repetitions", "seed", "seeds", "sweep", "tcp_state_period_s")


def default_jobs() -> int:
    """A quarter of the CPU cores, at least 1 (1 on a 2-core machine): each cell runs an emulator,
    senders, receivers and cross traffic in real time."""
    return max(1, (os.cpu_count() or 1) // 4)


def cell_id(scenario: Scenario) -> str:
    """A stable 12-hex-digit id of what the cell measures (see the module doc)."""
    data = scenario.to_data()
    for key in _NOT_HASHED:
        data.pop(key, None)

    def content(obj: Any) -> Any:  # trace files by content, not by where they lie
        if isinstance(obj, dict):
            return {k: (_file_digest(v) if k == "trace" else content(v)) for k, v in obj.items()}
        if isinstance(obj, list):
            return [content(v) for v in obj]
        return obj

    canonical = json.dumps(content(data), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _file_digest(path: str) -> str:
    try:
        return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return path


@dataclass(frozen=True)
class Cell:
    """One point of a sweep's grid."""

    index: int
    overrides: dict[str, Any]
    scenario: Scenario
    id: str

    @property
    def label(self) -> str:
        return describe(self.overrides)


@dataclass(frozen=True)
class Unit:
    """One cell run with one seed, in ``run_dir``."""

    cell: Cell
    seed: int
    run_dir: Path

    @property
    def label(self) -> str:
        return f"{self.cell.label} seed={self.seed}"

    @property
    def complete(self) -> bool:
        return markers.is_complete(self.run_dir)


def expand(scenario: Scenario) -> list[Cell]:
    """The cells of ``scenario``'s sweep, in grid order (one cell without a sweep). Two grid
    points that come out identical (e.g. a key swept to its base value twice) are one cell."""
    cells: list[Cell] = []
    seen: set[str] = set()
    for overrides in grid(scenario):
        sc = cell_scenario(scenario, overrides)
        cid = cell_id(sc)
        if cid in seen:
            continue
        seen.add(cid)
        cells.append(Cell(index=len(cells), overrides=overrides, scenario=sc, id=cid))
    return cells


def units(cells: Iterable[Cell], out_dir: str | os.PathLike, *, flat: bool = False) -> list[Unit]:
    """Every (cell, seed) pair and its run directory under ``out_dir``: ``cells/<id>/seed-<s>``,
    or ``seed-<s>`` with ``flat`` (one cell: ``tcpdelay run``)."""
    out = Path(out_dir)
    cells = list(cells)
    if flat and len(cells) != 1:
        raise ParameterError(f"a flat layout holds one cell, not {len(cells)}")
    return [Unit(cell=c, seed=s, run_dir=layout.run_dir(out, s, None if flat else c.id))
            for c in cells for s in c.scenario.seed_list]


@dataclass
class SweepResult:
    out_dir: Path
    cells: int
    units: int
    ran: int = 0
    skipped: int = 0
    failed: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    shard: tuple[int, int] | None = None

    def to_dict(self) -> dict:
        return {"out_dir": str(self.out_dir), "cells": self.cells, "units": self.units,
                "ran": self.ran, "skipped": self.skipped, "failed": self.failed,
                "wall_s": self.wall_s, "shard": None if self.shard is None else f"{self.shard[0]}/{self.shard[1]}"}


class _Lock:
    """An exclusive lock on an output directory, so two sweeps never write the same runs."""

    def __init__(self, out: Path):
        self.path = out / ".lock"

    def __enter__(self):
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise ParameterError(f"{self.path.parent}: another run or sweep is writing there; "
                                 "wait for it or choose another --out") from None
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def prepare(scenario: Scenario, out_dir: str | os.PathLike, cells: list[Cell], *, flat: bool = False) -> None:
    """Write the sweep's index, the scenario and each cell's scenario (before any run)."""
    out = Path(out_dir)
    write_text_atomic(out / layout.SCENARIO_FILE, dump_scenario(scenario))  # never an empty file on a full disk
    if flat:
        return
    (out / layout.CELLS_DIR).mkdir(parents=True, exist_ok=True)
    index = {
        "name": scenario.name, "seeds": list(scenario.seed_list),
        "sweep": scenario.sweep,
        "cells": [{"id": c.id, "index": c.index, "overrides": c.overrides, "label": c.label} for c in cells],
    }
    # A sweep resumed in place keeps the format version it was written in: its runs carry that
    # version, and an index stamped newer than its runs would misdescribe them (a rerun of the
    # README's command over committed version-1 results measures nothing and must leave them 1).
    write_json(out / layout.SWEEP_INDEX, index if _written_version(out / layout.SWEEP_INDEX) == 1 else stamp(index))
    for c in cells:
        d = layout.cell_dir(out, c.id)
        d.mkdir(exist_ok=True)
        write_json(d / layout.CELL_INDEX, {"id": c.id, "index": c.index, "overrides": c.overrides})
        write_text_atomic(d / layout.SCENARIO_FILE, dump_scenario(c.scenario))


def _written_version(index_path: Path) -> int | None:
    """The format version of the sweep index already at ``index_path`` (None: there is none, or
    it cannot be read, and the index is written anew in the current version)."""
    try:
        return version_of(json.loads(index_path.read_text()), str(index_path))
    except (OSError, ValueError, ParameterError):
        return None


ORDERS = ("grid", "random")


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (the I-th of N shards, 1 <= I <= N) as ``(I, N)``; anything else is one
    :class:`ParameterError`."""
    try:
        i, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise ParameterError(f"shard: {text!r} is not I/N (e.g. 1/4: the first of four shards)") from None
    if not 1 <= n <= 100_000 or not 1 <= i <= n:
        raise ParameterError(f"shard: {text!r}: I must be in 1..N and N in 1..100000")
    return i, n


def shard_units(all_units: list[Unit], shard: tuple[int, int] | None) -> list[Unit]:
    """The units of shard ``(I, N)``: every N-th unit of the sweep in grid order, from the I-th.
    The split depends only on the scenario, so the N shards are disjoint and cover the sweep
    whichever machine runs which (Slurm array task, Kubernetes Indexed Job)."""
    if shard is None:
        return list(all_units)
    i, n = shard
    return [u for k, u in enumerate(all_units) if k % n == i - 1]


def ordered(todo: list[Unit], order: str = "grid", seed: int = 1) -> list[Unit]:
    """``todo`` in grid order, or shuffled with ``seed`` (``random``: as flent and Pantheon do,
    so that a drift of the machine over time does not line up with a swept parameter)."""
    if order not in ORDERS:
        raise ParameterError(f"order: {order!r} is not one of {', '.join(ORDERS)}")
    if order == "grid":
        return list(todo)
    import random

    out = list(todo)
    random.Random(seed).shuffle(out)
    return out


#: Seconds a testbed run costs beyond its duration (building and tearing down the namespaces,
#: the emulator, the processes; the lead of a timed link): measured on this project's sweeps, e.g.
#: 18 video runs of 90 s in 1691 s.
TESTBED_OVERHEAD_S = 5.0
#: ns-3 simulates about this many bits of bottleneck traffic per second of wall time
#: (benchmarks/ns3_backend.py: 25 bulk flows at 30 Mb/s for 300 s in ~20 s), and a run costs this
#: much beyond, for its records and metrics (the full §5.1 grid: 420 runs in 23 min, ~0.5 s of them
#: simulating).
NS3_BITS_PER_WALL_S = 4e8
NS3_OVERHEAD_S = 2.5


def estimate_unit_s(scenario: Scenario, backend: str = "testbed") -> float:
    """A rough wall time of one run of ``scenario`` (seconds): its duration plus the testbed's
    set-up, or for ns-3 the traffic it simulates (the bottleneck's rate when TCP cross traffic
    fills it, else the media's rates) at :data:`NS3_BITS_PER_WALL_S`."""
    if backend == "testbed":
        return scenario.duration_s + TESTBED_OVERHEAD_S
    rate = scenario.path.direction("forward").rate_bps
    bulk = any(getattr(c, "kind", "") in ("bulk", "web_onoff", "page_load") and c.count for c in scenario.cross)
    media = 0.0
    for f in scenario.flows:
        size, interval = f.cbr or (1448, 0.02)        # a frame-sized source: about a packet a frame
        media += f.count * (f.rate_bps or size * 8 / interval)
    bits_s = rate if (bulk and rate) else media + sum(getattr(c, "rate_bps", 0) * c.count for c in scenario.cross
                                                      if getattr(c, "kind", "") == "udp")
    return scenario.duration_s * bits_s / NS3_BITS_PER_WALL_S + NS3_OVERHEAD_S


def estimate_wall_s(unit_s: list[float], slots: int) -> float:
    """The wall time of runs lasting ``unit_s`` seconds on ``slots`` slots (nodes x jobs), each run
    given to the slot that frees first, the longest first (Graham's LPT rule: within 4/3 of the
    best schedule): 840 runs of 305 s on 100 slots take 9 rounds, not 8.4."""
    import heapq

    if slots < 1:
        raise ParameterError(f"slots: {slots!r} must be >= 1")
    free = [0.0] * min(slots, max(len(unit_s), 1))
    for d in sorted(unit_s, reverse=True):
        heapq.heapreplace(free, free[0] + d)
    return max(free)


ENGINES = ("local", "ray")


def run_sweep(scenario: Scenario, out_dir: str | os.PathLike, runner: CellRunner, *, jobs: int = 1,
              console: Console | None = None, progress: bool = True, flat: bool = False,
              shard: tuple[int, int] | None = None, order: str = "grid", order_seed: int = 1,
              engine: str = "local", address: str | None = None, testbed: bool = True,
              on_started: Callable[[Unit, str, int], None] | None = None) -> SweepResult:
    """Run every unit of ``scenario``'s sweep that is not complete yet, ``jobs`` at a time.

    ``flat`` runs the scenario as written, without its sweep, into ``OUT/seed-<s>/``
    (``tcpdelay run``). When one unit runs at a time and ``runner`` takes an ``on_progress``
    keyword, a second bar follows the unit's own time.

    ``shard`` ``(I, N)`` runs only the I-th of N disjoint parts of the units (:func:`shard_units`);
    ``order`` ``"random"`` shuffles the runs with ``order_seed`` (:func:`ordered`).

    ``engine`` ``"ray"`` runs each unit as a Ray task (:mod:`tcpdelay.experiments.ray_engine`) on
    the cluster at ``address`` (or a Ray instance started here, with ``jobs`` testbed slots);
    ``testbed`` says whether the units need a node's ``testbed`` resource (the testbed backend) or
    one CPU (ns-3, models); ``on_started(unit, node, pid)`` hears where each unit started.

    A unit that fails is recorded (``failed.json``, and in the result) and the others go on;
    :class:`~tcpdelay.errors.EnvironmentNotSupported` (no root, no TUN: every unit would fail)
    stops the sweep. An interrupt stops it too; what completed stays complete.
    """
    if not isinstance(jobs, int) or jobs < 1:
        raise ParameterError(f"jobs: {jobs!r} must be an integer >= 1")
    if engine not in ENGINES:
        raise ParameterError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}")
    ordered([], order)                       # a bad order is refused before anything is written
    if engine == "ray":                      # the cluster joined (or refused) before anything is written
        from tcpdelay.experiments import ray_engine

        with ray_engine.Connection(address, jobs, testbed):
            return _sweep(scenario, out_dir, runner, jobs, console, progress, flat, shard, order, order_seed,
                          ray_units=True, testbed=testbed, on_started=on_started)
    return _sweep(scenario, out_dir, runner, jobs, console, progress, flat, shard, order, order_seed)


def _sweep(scenario: Scenario, out_dir, runner: CellRunner, jobs: int, console: Console | None, progress: bool,
           flat: bool, shard: tuple[int, int] | None, order: str, order_seed: int, *, ray_units: bool = False,
           testbed: bool = True, on_started=None) -> SweepResult:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if flat:
        scenario = scenario.model_copy(update={"sweep": {}})
    cells = expand(scenario)
    todo_all = shard_units(units(cells, out, flat=flat), shard)
    result = SweepResult(out_dir=out, cells=len(cells), units=len(todo_all), shard=shard)
    t_start = time.monotonic()
    with _Lock(out):
        prepare(scenario, out, cells, flat=flat)
        todo = ordered([u for u in todo_all if not u.complete], order, order_seed)
        result.skipped = len(todo_all) - len(todo)
        console = console or Console(stderr=True)
        bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                       console=console, disable=not progress, transient=False)
        with bar:
            task = bar.add_task(scenario.name or "sweep", total=len(todo_all), completed=result.skipped)

            def done(unit: Unit, err: BaseException | None) -> None:
                if err is None:
                    result.ran += 1
                else:
                    notes = "".join(f" ({n})" for n in getattr(err, "__notes__", ()))
                    result.failed.append({"cell_id": unit.cell.id, "seed": unit.seed, "label": unit.cell.label,
                                          "run_dir": str(unit.run_dir), "error": f"{type(err).__name__}: {err}{notes}"})
                    bar.console.print(f"[red]failed[/red] {unit.label}: {err}")
                bar.advance(task)

            if ray_units:
                if todo:
                    from tcpdelay.experiments.ray_engine import run_on_ray

                    run_on_ray(todo, runner, testbed=testbed, bar=bar, task=task, done=done, on_started=on_started)
            elif jobs == 1 or len(todo) <= 1:
                follow = progress and "on_progress" in inspect.signature(runner).parameters
                for unit in todo:
                    bar.update(task, description=unit.label)
                    one = runner
                    if follow:
                        sub = bar.add_task(f"  seed {unit.seed}", total=None)

                        def on_progress(elapsed_s: float, total_s: float, sub=sub) -> None:
                            bar.update(sub, completed=elapsed_s, total=total_s)

                        one = functools.partial(runner, on_progress=on_progress)
                    try:
                        run_unit(one, unit.cell.scenario, unit.seed, str(unit.run_dir), unit.cell.id)
                    except EnvironmentNotSupported:
                        raise
                    except Exception as err:  # recorded; the other cells go on
                        done(unit, err)
                    else:
                        done(unit, None)
                    finally:
                        if follow:
                            bar.remove_task(sub)
            else:
                _run_parallel(todo, runner, jobs, bar, task, done)
            bar.update(task, description=scenario.name or "sweep")
        if not flat:
            from tcpdelay.results.tidy import write_tidy

            write_tidy(out)        # runs.parquet / runs.csv: a row per run, for pandas users
    result.wall_s = time.monotonic() - t_start
    return result


_STOP = None  # in a worker: the sweep's "stop" event (set when the sweep is interrupted)
_SWEEP_PID = None  # in a worker: the sweep's pid


class _Cancelled(Exception):
    """A unit the sweep no longer wants (it was interrupted before the unit started)."""


def _init_worker(stop, sweep_pid: int) -> None:
    global _STOP, _SWEEP_PID
    _STOP, _SWEEP_PID = stop, sweep_pid
    # Die with the sweep: a worker outliving a killed sweep would go on running (and owning)
    # its testbed, and then idle forever. SIGTERM lets a running unit tear its testbed down.
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != sweep_pid:  # the sweep died before the line above
        os._exit(1)


def _run_unit_in_worker(runner: CellRunner, scenario: Scenario, seed: int, run_dir: str, cell_id_: str) -> dict:
    if _STOP is not None and _STOP.is_set():
        raise _Cancelled()
    try:
        return run_unit(runner, scenario, seed, run_dir, cell_id_)
    except (SystemExit, KeyboardInterrupt):
        if os.getppid() != _SWEEP_PID:
            os._exit(1)  # the sweep is gone (its unit failed and cleaned up): nobody to answer
        # Ctrl-C reached this worker: stop the sweep from here too. The pool queues a unit beyond
        # the running ones, and this worker takes it the moment this one returns; on a busy
        # machine that came before the sweep itself had set the event, and the unit ran its
        # whole length (120 s in the test) with no Ctrl-C left to stop it.
        if _STOP is not None:
            _STOP.set()
        raise


def _run_parallel(todo: list[Unit], runner: CellRunner, jobs: int, bar: Progress, task, done) -> None:
    # "spawn": workers start clean (no inherited threads or locks from the progress display).
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker,
                                initargs=(stop, os.getpid())) as pool:
        futures = {pool.submit(_run_unit_in_worker, runner, u.cell.scenario, u.seed, str(u.run_dir), u.cell.id): u
                   for u in todo}
        bar.update(task, description=f"{len(todo)} runs, {jobs} at a time")
        try:
            for fut in cf.as_completed(futures):
                unit = futures[fut]
                err = fut.exception()
                if isinstance(err, EnvironmentNotSupported):
                    raise err
                done(unit, err)
        except BaseException:
            # Units already queued to a worker must not start; running ones got the same Ctrl-C
            # (same process group) and stop, cleaning their testbeds up.
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)
            raise
