"""The results on disk (``tcpdelay.results``): the one place that knows how a run or a sweep
lies in its directory, and reads it back.

Above :mod:`tcpdelay.metrics` (it measures what it reads with it), below
:mod:`tcpdelay.experiments` (which writes through it) and :mod:`tcpdelay.report` (which draws
what it reads). Modules:

- :mod:`~tcpdelay.results.layout` — file and marker names, run directory naming, finding the
  runs of a sweep, a ``tcpdelay run`` directory or one run
- :mod:`~tcpdelay.results.version` — the results format version (missing: version 1)
- :mod:`~tcpdelay.results.markers` — ``complete.json`` / ``failed.json``
- :mod:`~tcpdelay.results.runs` — ``run.json``, ``flows.parquet``, ``metrics.json``
- :mod:`~tcpdelay.results.packets` — the records joined per flow, ``packets.parquet`` and the
  one form of a file of packet delays
- :mod:`~tcpdelay.results.load`, :mod:`~tcpdelay.results.aggregate` — a result read back and its
  repetitions joined per cell
"""

from tcpdelay.results.aggregate import (PLOT_PLAYOUT_DELAYS_S, aggregate_cell, aggregate_cell_cached,
                                        finite_mean, late_at)
from tcpdelay.results.load import QUALITY_BIN_S, CellData, FlowRun, Results, RunData, load_results
from tcpdelay.results.version import FORMAT_VERSION

__all__ = ["FORMAT_VERSION", "PLOT_PLAYOUT_DELAYS_S", "QUALITY_BIN_S", "CellData", "FlowRun", "Results",
           "RunData", "aggregate_cell", "aggregate_cell_cached", "finite_mean", "late_at", "load_results"]
