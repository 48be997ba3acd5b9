"""Reproduction 1: the CBR-over-TCP delay model against real Linux TCP (``tcpdelay validate``).

Brosh, Baset, Misra, Rubenstein, Schulzrinne, *The Delay-Friendliness of TCP for Real-Time
Traffic*, §5.1 ("Validation Using Configured Drop Rates"): one CBR flow over TCP through a box
that drops packets uniformly at random, no cross traffic; drop rates 0.1, 0.5, 1, 2, 3, 5, 10 %
× RTT 20, 100, 300 ms; five minutes, ten repetitions per point; measured mean, 95th percentile
and standard deviation of the delay against the model's (Figs 5, 11) and the relative error of
the mean (Fig 8).

Here: the ``voip`` (64 kb/s) and ``video`` (573 kb/s) profiles, each on two Linux stacks
(``newreno-2008``, ``linux-default``) through the testbed (real kernel TCP in namespaces, the
``tcpdelay-link`` emulator dropping data segments with probability p). Every measured point is
set against :func:`tcpdelay.model.delay.predict` with the same profile, the RTT and p the run
recorded, the model's defaults otherwise (T0 = RTT + 200 ms, MSS 1448 bytes = the testbed's
1500-byte MTU with TCP timestamps, random loss, limited transmit).

The science: :mod:`.grid` (the scenario and its sizes), :mod:`.model_side` (the model at a
point), :mod:`.measured` (the measured points of a sweep directory), :mod:`.compare` (relative
errors, the paper's claims), :mod:`.interpretation` (the comparison in words; the prose in
``texts.md``, :mod:`.texts`). The job: :mod:`.job` (run, compare, write; the HTML page is
``tcpdelay.report.validation_page``, passed in as ``page=``), :mod:`.writers` (validation.json,
validation-delays.parquet), :mod:`.table` (rows of text for the CLI and the page).

The output directory is a sweep directory (``tcpdelay report`` reads it too) plus
``validation.json``, ``validation-delays.parquet`` and ``validation.html``.
"""

from tcpdelay.experiments.validation.compare import PAPER_CLAIMS, claim_checks, compare, relative_error
from tcpdelay.experiments.validation.grid import (
    FULL, PAPER_LOSSES, PAPER_RTTS_S, PROFILES, REDUCED, STACKS, scenario_data, size_label, validation_scenario,
)
from tcpdelay.experiments.validation.interpretation import interpretation
from tcpdelay.experiments.validation.job import PageWriter, evaluate_validation, run_validation
from tcpdelay.experiments.validation.measured import measured_points, read_measured_points, recorded_path
from tcpdelay.experiments.validation.model_side import MSS_BYTES, model_point
from tcpdelay.experiments.validation.table import TABLE_COLUMNS, table_columns, table_rows
from tcpdelay.experiments.validation.writers import (
    DELAYS_FILE, VALIDATION_FILE, write_delays, write_validation_json,
)

__all__ = [
    "DELAYS_FILE", "FULL", "MSS_BYTES", "PAPER_CLAIMS", "PAPER_LOSSES", "PAPER_RTTS_S", "PROFILES",
    "REDUCED", "STACKS", "TABLE_COLUMNS", "VALIDATION_FILE", "PageWriter", "claim_checks", "compare",
    "evaluate_validation", "interpretation", "measured_points", "model_point", "read_measured_points",
    "recorded_path", "relative_error", "run_validation", "scenario_data", "size_label", "table_columns",
    "table_rows", "validation_scenario", "write_delays", "write_validation_json",
]
