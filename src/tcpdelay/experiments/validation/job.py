"""The validation job (``tcpdelay validate``): measure every point of the grid not yet measured
in a sweep directory (resumable, through :func:`tcpdelay.experiments.sweep.run_sweep`), set it
against the model, write ``validation-delays.parquet`` and ``validation.json``, and hand the
points to a page writer if one is given (the CLI passes
:func:`tcpdelay.report.validation_page.write_validation_page`: ``validation.html``).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path

from tcpdelay.experiments.validation.compare import claim_checks, compare
from tcpdelay.experiments.validation.grid import size_label, validation_scenario
from tcpdelay.experiments.validation.interpretation import interpretation
from tcpdelay.experiments.validation.measured import read_measured_points
from tcpdelay.experiments.validation.model_side import MSS_BYTES
from tcpdelay.experiments.validation.writers import (
    DELAYS_FILE, VALIDATION_FILE, write_delays, write_validation_json,
)

#: A page writer: ``page(out_dir, points, doc) -> path written``. ``points`` are the compared
#: points with their private keys (``_delays``, ``_prediction``: the CDFs); ``doc`` is what
#: ``validation.json`` holds.
PageWriter = Callable[[Path, list[dict], dict], Path]


def run_validation(out_dir: str | os.PathLike, *, full: bool = False, jobs: int = 1,
                   duration_s: float | None = None, repetitions: int | None = None,
                   grid: dict | None = None, console=None, progress: bool = True,
                   page: PageWriter | None = None, backend: str = "testbed") -> dict:
    """Measure every point not yet measured in ``out_dir`` (resumable), compare with the model
    and write ``validation.json`` there (and the page, with ``page``: see
    :func:`evaluate_validation`). Needs the ``backend`` (the testbed, or ns-3), unless every run
    is already complete there (then only the model side is recomputed)."""
    import functools

    from tcpdelay.experiments.backend_check import check_scenario
    from tcpdelay.experiments.backends import get_backend
    from tcpdelay.experiments.run import run_scenario
    from tcpdelay.experiments.sweep import expand, run_sweep, units

    scenario = validation_scenario(full, duration_s=duration_s, repetitions=repetitions, grid=grid)
    cells = expand(scenario)
    if any(not u.complete for u in units(cells, out_dir)):
        runner = get_backend(backend)
        runner.check()
        check_scenario(scenario, runner, cells)   # what the backend cannot run: one line before anything runs
    run = run_scenario if backend == "testbed" else functools.partial(run_scenario, backend=backend)
    res = run_sweep(scenario, out_dir, run, jobs=jobs, console=console, progress=progress)
    size = size_label(full, duration_s=duration_s, repetitions=repetitions, grid=grid)
    if progress:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        with Progress(TextColumn("comparing with the model"), BarColumn(), MofNCompleteColumn(),
                      console=console or Console(stderr=True), transient=True) as bar:
            task = bar.add_task("runs", total=None)
            doc = evaluate_validation(out_dir, size=size, page=page,
                                      progress=lambda d, t: bar.update(task, completed=d, total=t))
    else:
        doc = evaluate_validation(out_dir, size=size, page=page)
    doc["sweep"] = res.to_dict()
    write_validation_json(Path(out_dir) / VALIDATION_FILE, doc)
    return doc


def evaluate_validation(out_dir: str | os.PathLike, *, size: str = "reduced", progress=None,
                        page: PageWriter | None = None) -> dict:
    """Compare what ``out_dir`` holds with the model (no measuring), write
    ``validation-delays.parquet`` (``delays_path``), then ``page(out_dir, points, doc)`` if
    given (``report_path``: the path it returns). ``progress(done, total)`` after each run read.
    Returns the document :func:`run_validation` writes as ``validation.json``."""
    out = Path(out_dir)
    points = compare(read_measured_points(out, progress=progress))
    scenario_doc = json.loads((out / "sweep.json").read_text()) if (out / "sweep.json").is_file() else {}
    doc = {
        "size": size,
        "duration_s": _duration(out),
        "seeds": scenario_doc.get("seeds"),
        "mss_bytes": MSS_BYTES,
        "points": [{k: v for k, v in p.items() if not k.startswith("_")} for p in points],
        "claims": claim_checks(points),
        "interpretation": interpretation(points),
    }
    doc["delays_path"] = str(write_delays(out / DELAYS_FILE, points))
    if page is not None:
        doc["report_path"] = str(page(out, points, doc))
    return doc


def _duration(out: Path) -> float | None:
    """The run length (s) of the sweep's scenario (``out/scenario.toml``), None if unreadable."""
    try:
        return float(tomllib.loads((out / "scenario.toml").read_text())["duration_s"])
    except (OSError, ValueError, KeyError):
        return None
