"""One unit of a sweep — a cell's scenario run once with one seed — into its run directory, with
the markers that say how it ended (:mod:`tcpdelay.results.markers`). Every engine runs a unit
through :func:`run_unit`: one after another or in worker processes here
(:mod:`tcpdelay.experiments.sweep`), or as Ray tasks on other nodes
(:mod:`tcpdelay.experiments.ray_engine`)."""

from __future__ import annotations

import shutil
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from tcpdelay.experiments.scenario import Scenario
from tcpdelay.results import layout, markers
from tcpdelay.results.packets import write_run_packets

#: A cell runner: runs ``scenario`` once with ``seed``, writing into ``run_dir`` (which exists
#: and is empty), and returns a JSON-able summary. It must be a module-level function (it is
#: sent to worker processes when ``jobs > 1``).
CellRunner = Callable[[Scenario, int, Path], "dict[str, Any] | None"]


def run_unit(runner: CellRunner, scenario: Scenario, seed: int, run_dir: str, cell_id_: str) -> dict:
    """Run one unit into a fresh ``run_dir``; ``complete.json`` is written last, only on success;
    on failure ``failed.json`` says why and the error is re-raised."""
    rd = Path(run_dir)
    if rd.exists():
        shutil.rmtree(rd)  # an interrupted or failed attempt: its partial data is not a result
    rd.mkdir(parents=True)
    started = time.time()
    t0 = time.monotonic()
    try:
        markers.reserve(rd)  # room for failed.json, even if the run fills the disk
        summary = runner(scenario, seed, rd)
        # the records joined into packets.parquet before the run is marked complete (nothing
        # when the runner wrote no records)
        write_run_packets(rd)
        record = markers.write_complete(rd, {"cell_id": cell_id_, "seed": seed, "started_unix_s": started,
                                             "wall_s": time.monotonic() - t0, "summary": summary or {}})
    except BaseException as err:
        try:
            markers.write_failed(rd, {
                "cell_id": cell_id_, "seed": seed, "error": f"{type(err).__name__}: {err}",
                "traceback": traceback.format_exc()})
        except OSError as marker_err:  # the run's own error is the one reported
            err.add_note(f"{layout.FAILED} could not be written: {marker_err}")
        raise
    return record
