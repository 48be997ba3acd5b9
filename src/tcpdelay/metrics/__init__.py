"""Metrics of a recorded run, from its per-packet records (``tcpdelay.metrics``).

Modules (functions over arrays; each docstring names the paper and section it follows):

- :mod:`~tcpdelay.metrics.packets` — join ``sent`` and ``received`` records per flow
- :mod:`~tcpdelay.metrics.delay` — delay statistics, late fraction vs playout delay, RFC 3550
  jitter, loss
- :mod:`~tcpdelay.metrics.jitter_filter`, :mod:`~tcpdelay.metrics.quality` — pure/delayed loss
  and the loss-period quality levels of the interactive-audio-over-HSPA study
- :mod:`~tcpdelay.metrics.rtpi`, :mod:`~tcpdelay.metrics.fairness` — Real-Time Performance Index,
  delayed packets rate, packet loss rate, goodput and Jain's index (Papadimitriou & Tsaoussidis)
- :mod:`~tcpdelay.metrics.video`, :mod:`~tcpdelay.metrics.tcp_stats` — picture discards,
  playout-buffer underflows, TCP retransmissions (Watanabe et al.)
- :mod:`~tcpdelay.metrics.emodel` — ITU-T G.107 E-model R and MOS
- :mod:`~tcpdelay.metrics.summary` — all of them for a run's flows (for a run directory:
  :func:`tcpdelay.results.runs.summarize_run`)
"""

from tcpdelay.metrics.packets import FlowPackets, flows_from_tables
from tcpdelay.metrics.summary import MetricOptions, summarize_flows

__all__ = ["FlowPackets", "MetricOptions", "flows_from_tables", "summarize_flows"]
