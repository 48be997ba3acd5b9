"""Which metrics a results report shows: the scenario's ``metrics`` key.

A scenario lists the metrics its reports should show (``metrics = ["delay", "late", "loss"]``,
docs/experiments/README.md); ``tcpdelay report`` shows those columns and figures and no others.
The scenario is the ``scenario.toml`` that ``tcpdelay run`` / ``tcpdelay sweep`` copy into their
output (top level, or the run directory itself for one run). Without a scenario file (records
laid out by other tools) every metric is shown. ``metrics.json`` of each run, and the JSON of
``tcpdelay report``, hold every metric whatever the scenario asks for.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario import DEFAULT_METRICS, METRICS


def shown_metrics(results_dir: str | Path) -> tuple[str, ...]:
    """The metrics the report of ``results_dir`` shows, in :data:`METRICS` order."""
    sc = Path(results_dir) / "scenario.toml"
    if not sc.is_file():
        return METRICS
    try:
        doc = tomllib.loads(sc.read_text())
    except (OSError, ValueError) as err:
        raise ParameterError(f"RESULTS: {str(sc)!r} is not a readable scenario ({err})") from None
    asked = doc.get("metrics", DEFAULT_METRICS)
    if not isinstance(asked, list | tuple) or any(m not in METRICS for m in asked):
        raise ParameterError(f"RESULTS: {str(sc)!r}: metrics: {asked!r} is not a list of "
                             f"{', '.join(METRICS)}")
    return tuple(m for m in METRICS if m in asked)
