"""The scenario file: one experiment as validated data (flent style: a test is declarative data).

A scenario is a TOML file describing *what* to run — the path, the media flows, the cross
traffic, how long, how often, which metrics — and nothing about *how*: no namespace, interface
or process names, so every backend (:mod:`tcpdelay.experiments.backends`: the testbed, ns-3)
runs the same file. The format is documented in ``docs/experiments/README.md``;
``experiments/*.toml`` are examples.

Every problem is one line naming the file and the bad key, e.g.::

    scenario.toml: flows[1].profile: 'voip2' is not one of voip, voip-low, ...

raised as :class:`tcpdelay.errors.ParameterError` (exit status 2 on the command line).

A ``[sweep]`` table declares parameter grids: each key is a dotted path into the scenario
(``"path.loss.p"``, ``"flows[0].profile"``) and each value a list; the cells of the sweep are the
Cartesian product (:func:`grid`). Every cell is validated when the file is loaded, so a sweep
never fails half way on a typo.

One room per part of the file, each importing only the rooms above it in this list:

- ``base``: what every table shares (unknown keys refused, frozen values, time types);
- ``path``: ``[path]`` and ``[access]``, resolved into the link's own direction settings;
- ``tcp``: the ``tcp`` table (a preset with overrides, the congestion-control choice);
- ``quic``: the ``quic`` table of a flow over QUIC (congestion control, stream deadline);
- ``flows``: ``[[flows]]``, media flows and their delay heuristics;
- ``cross``: ``[[cross]]``, one class per cross-traffic kind;
- ``streams``: ``[[streams]]``, pulled streams (video over HTTP);
- ``host_kernel``: ``[host_kernel]``, hosts that boot a reference kernel (testbed only);
- ``experiment``: the top table (:class:`Scenario`) and the checks spanning its parts;
- ``validate``: data -> :class:`Scenario`, or one line naming the bad key;
- ``grid``: ``[sweep]`` keys, the grid of cells and each cell's scenario;
- ``load``: reading a TOML file (trace paths resolved, every cell checked) and writing one.

This module hands on their public names: import from ``tcpdelay.experiments.scenario``.
"""

from tcpdelay.experiments.scenario.base import PositiveSeconds, Seconds
from tcpdelay.experiments.scenario.cross import (
    CROSS_KINDS, BulkCross, Cross, PageLoadCross, TransfersCross, UdpCross, WebOnOffCross,
)
from tcpdelay.experiments.scenario.experiment import (
    DEFAULT_METRICS, DEFAULT_TCP_STATE_PERIOD_S, MAX_DURATION_S, METRICS, Scenario,
)
from tcpdelay.experiments.scenario.flows import PROFILES, Flow, Heuristics
from tcpdelay.experiments.scenario.host_kernel import HostKernel
from tcpdelay.experiments.scenario.grid import (
    MAX_SWEEP_CELLS, apply_overrides, cell_scenario, describe, grid, linked_keys,
)
from tcpdelay.experiments.scenario.load import dump_scenario, load_scenario, parse_scenario
from tcpdelay.experiments.scenario.path import (
    DEFAULT_MTU_BYTES, MAX_MTU_BYTES, MIN_MTU_BYTES, Access, Direction, Loss, Path,
)
from tcpdelay.experiments.scenario.streams import (
    HTTP_TCP_BUFFER_MAX_BYTES, STREAM_KINDS, HttpVideo, Stream, VideoFile,
)
from tcpdelay.experiments.scenario.tcp import (
    MIN_MSS_BYTES, MSS_OVERHEAD_BYTES, TCP_PRESETS, TRANSFERS_ONLY_TCP_KEYS, Tcp, congestion_choice,
)
from tcpdelay.experiments.scenario.validate import format_loc
# The link's loss models and settings, handed on under the scenario's names.
from tcpdelay.link import (
    BernoulliLoss, DelaySeconds, DirectionSpec, GilbertElliottLoss, JitterSeconds, KnownKeys,
    LossSpec, NoLoss, Outage, QueueBytes, QueuePackets, RateBps, as_part,
)

__all__ = [
    "CROSS_KINDS", "DEFAULT_METRICS", "DEFAULT_MTU_BYTES", "DEFAULT_TCP_STATE_PERIOD_S",
    "HTTP_TCP_BUFFER_MAX_BYTES", "MAX_DURATION_S", "MAX_MTU_BYTES", "MAX_SWEEP_CELLS", "METRICS",
    "MIN_MSS_BYTES", "MIN_MTU_BYTES", "MSS_OVERHEAD_BYTES", "PROFILES", "STREAM_KINDS", "TCP_PRESETS",
    "TRANSFERS_ONLY_TCP_KEYS",
    "Access", "BernoulliLoss", "BulkCross", "Cross", "DelaySeconds", "Direction", "DirectionSpec",
    "Flow", "GilbertElliottLoss", "Heuristics", "HostKernel", "HttpVideo", "JitterSeconds", "KnownKeys", "Loss",
    "LossSpec", "NoLoss", "Outage", "PageLoadCross", "Path", "PositiveSeconds", "QueueBytes",
    "QueuePackets", "RateBps", "Scenario", "Seconds", "Stream", "Tcp", "TransfersCross", "UdpCross",
    "VideoFile", "WebOnOffCross",
    "apply_overrides", "as_part", "cell_scenario", "congestion_choice", "describe", "dump_scenario",
    "format_loc", "grid", "linked_keys", "load_scenario", "parse_scenario",
]
