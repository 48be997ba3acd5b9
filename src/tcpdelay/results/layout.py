"""Where a result lies on disk: the names of its files and how its run directories are found.

Three shapes (docs/experiments/README.md, "Output"):

- a *sweep* directory (``tcpdelay sweep``)::

      OUT/sweep.json                      the cells (id, label, overrides) and seeds, written first
      OUT/scenario.toml                   the scenario as given (with its [sweep])
      OUT/cells/<cell_id>/cell.json       the cell's overrides
      OUT/cells/<cell_id>/scenario.toml   the cell's scenario (overrides applied, no sweep)
      OUT/cells/<cell_id>/seed-<s>/       one run

- a *run* directory (``tcpdelay run``): ``OUT/scenario.toml`` and ``OUT/seed-<s>/``;
- one run directory: records (``sent/``, ``received/``), ``run.json``, ``flows.parquet``,
  ``metrics.json``, ``packets.parquet`` and, written last, ``complete.json`` or ``failed.json``.

:func:`run_dir` names a run's directory (the sweep uses it to lay runs out); :func:`find_runs`
finds them again (the report and the reproduction scripts read through it).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tcpdelay.errors import ParameterError
from tcpdelay.records import RUN_METADATA
from tcpdelay.results.version import version_of

#: Written last into a run that completed (:mod:`tcpdelay.results.markers`).
COMPLETE = "complete.json"
#: Written into a run that failed, with its error.
FAILED = "failed.json"
#: A sweep's index: its cells and seeds.
SWEEP_INDEX = "sweep.json"
#: The scenario of a sweep, a run directory or a cell.
SCENARIO_FILE = "scenario.toml"
#: The folder of a sweep's cells, and each cell's own index.
CELLS_DIR = "cells"
CELL_INDEX = "cell.json"
#: Per-flow summary of a run (one row per media flow and cross-traffic flow).
FLOWS_FILE = "flows.parquet"
#: The machine and settings a run ran on (kernel, TCP settings read back, the testbed's layout).
ENVIRONMENT_FILE = "environment.json"
#: Every metric of a run, as ``tcpdelay metrics`` computes it.
METRICS_FILE = "metrics.json"
#: A run's records joined, in one small file (:mod:`tcpdelay.results.packets`).
PACKETS_FILE = "packets.parquet"
#: A sweep's every media packet's delay (the reproduction scripts' cache, rebuilt from the runs).
DELAYS_FILE = "delays.parquet"
#: The folders of per-packet record parts a run writes as it goes (:mod:`tcpdelay.records`).
RECORD_KINDS = ("sent", "received", "tcp_state", "playout", "link_queue")

__all__ = ["CELLS_DIR", "CELL_INDEX", "COMPLETE", "CellRuns", "DELAYS_FILE", "ENVIRONMENT_FILE", "FAILED", "FLOWS_FILE",
           "Layout", "METRICS_FILE", "PACKETS_FILE", "RECORD_KINDS", "RUN_METADATA", "SCENARIO_FILE",
           "SWEEP_INDEX", "cell_dir", "find_runs", "has_records", "is_run_dir", "read_sweep_index",
           "run_dir", "seed_dirs", "seed_of"]

_SEED = re.compile(r"seed-(-?\d+)")


def seed_of(path: str | os.PathLike) -> int | None:
    """The seed of a run directory named ``seed-<s>``; None for any other name."""
    m = _SEED.fullmatch(Path(path).name)
    return int(m.group(1)) if m else None


def cell_dir(out: str | os.PathLike, cell_id: str) -> Path:
    """``OUT/cells/<cell_id>``."""
    return Path(out) / CELLS_DIR / cell_id


def run_dir(out: str | os.PathLike, seed: int, cell_id: str | None = None) -> Path:
    """The directory of the run with ``seed``: ``OUT/cells/<cell_id>/seed-<s>`` in a sweep, or
    ``OUT/seed-<s>`` when ``cell_id`` is None (a run directory: ``tcpdelay run``)."""
    base = Path(out) if cell_id is None else cell_dir(out, cell_id)
    return base / f"seed-{seed}"


#: The record kinds of media packets (the others, TCP state and a player's log, come with them or
#: with pulled streams).
PACKET_KINDS = ("sent", "received")


def has_records(path: str | os.PathLike) -> bool:
    """Whether the run directory holds media packet record parts (``sent/`` or ``received/``)."""
    return any((Path(path) / k).is_dir() for k in PACKET_KINDS)


def is_run_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` looks like one run (a marker, ``run.json`` or records)."""
    p = Path(path)
    return any((p / n).exists() for n in (COMPLETE, FAILED, RUN_METADATA, *RECORD_KINDS))


def seed_dirs(path: str | os.PathLike) -> list[Path]:
    """The ``seed-<s>`` directories in ``path``, by seed (none when ``path`` is not a directory)."""
    p = Path(path)
    if not p.is_dir():
        return []
    dirs = [d for d in p.glob("seed-*") if d.is_dir() and seed_of(d) is not None]
    return sorted(dirs, key=seed_of)


def read_sweep_index(root: str | os.PathLike) -> dict:
    """``root/sweep.json``, checked: a list of cells, each with an ``id``, in a format version
    this code reads. Raises ParameterError (one line) otherwise."""
    index = Path(root) / SWEEP_INDEX
    try:
        doc = json.loads(index.read_text())
        for c in doc["cells"]:
            str(c["id"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ParameterError(f"RESULTS: {str(index)!r} is not a sweep index ({err})") from None
    version_of(doc, f"RESULTS: {str(index)!r}")
    return doc


@dataclass(frozen=True)
class CellRuns:
    """One cell of a result and the run directories found in it (by seed)."""

    id: str
    label: str
    """The cell's label (``-``: a cell without overrides, or a result that is not a sweep)."""
    overrides: dict
    runs: tuple[Path, ...]
    entry: dict = field(default_factory=dict, compare=False)
    """The cell's entry in ``sweep.json`` as written ({} when the result is not a sweep)."""


@dataclass(frozen=True)
class Layout:
    """A result directory as found on disk."""

    root: Path
    kind: str
    """sweep | run (a ``tcpdelay run`` directory with seed-*/) | single (one run directory)"""
    name: str
    cells: tuple[CellRuns, ...]

    def run_dirs(self) -> list[tuple[CellRuns, Path]]:
        """Every run directory with its cell, in the sweep's cell order and by seed."""
        return [(c, d) for c in self.cells for d in c.runs]


def find_runs(path: str | os.PathLike) -> Layout:
    """The cells and run directories of ``path``: a sweep (``sweep.json``), a run directory
    (``seed-*/``) or one run. Raises ParameterError (one line, ``RESULTS: ...``) for anything else."""
    root = Path(path)
    if not root.exists():
        raise ParameterError(f"RESULTS: {str(root)!r} does not exist")
    if not root.is_dir():
        raise ParameterError(f"RESULTS: {str(root)!r} is not a directory (give a run or sweep "
                             "directory written by tcpdelay run / tcpdelay sweep)")
    if (root / SWEEP_INDEX).is_file():
        doc = read_sweep_index(root)
        try:
            cells = tuple(CellRuns(str(c["id"]), c.get("label") or "-", dict(c.get("overrides") or {}),
                                   tuple(seed_dirs(cell_dir(root, str(c["id"])))), dict(c))
                          for c in doc["cells"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise ParameterError(f"RESULTS: {str(root / SWEEP_INDEX)!r} is not a sweep index ({err})") from None
        return Layout(root, "sweep", str(doc.get("name") or root.name), cells)
    if seed_dirs(root):
        return Layout(root, "run", _scenario_name(root), (CellRuns("-", "-", {}, tuple(seed_dirs(root))),))
    if is_run_dir(root):
        return Layout(root, "single", _scenario_name(root), (CellRuns("-", "-", {}, (root,)),))
    raise ParameterError(f"RESULTS: {str(root)!r} is neither a sweep directory (sweep.json), a run "
                         "directory (seed-*/) nor one run (complete.json, records)")


def _scenario_name(path: Path) -> str:
    sc = path / SCENARIO_FILE
    if sc.is_file():
        import tomllib

        try:
            return str(tomllib.loads(sc.read_text()).get("name") or path.name)
        except (OSError, ValueError):
            pass
    return path.name
