"""A run's TCP state over time: its ``tcp_state`` records (:data:`tcpdelay.records.TCP_STATE_SCHEMA`),
one series per TCP connection, for the report's time-series figures (docs/metrics.md, "TCP
state over time"). A run measured before the sampler existed has none: :func:`tcp_state` is
``None`` then, and the report draws nothing more.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from tcpdelay.records import read_records

__all__ = ["TcpStateSeries", "tcp_state", "tcp_state_series"]


def tcp_state(run_dir: str | os.PathLike) -> pa.Table | None:
    """The run's ``tcp_state`` rows sorted by flow, connection and time (``None``: it has none)."""
    t = read_records(run_dir, "tcp_state")
    if t.num_rows == 0:
        return None
    return t.sort_by([("flow_id", "ascending"), ("connection", "ascending"), ("time_s", "ascending")])


@dataclass
class TcpStateSeries:
    """One connection's samples: ``t_s`` from the run's first sample (s), ``cwnd_segments``,
    ``srtt_s``, ``delivery_rate_bps`` (NaN where the kernel had none), ``retransmits_total``."""
    flow_id: int
    connection: int
    t_s: np.ndarray
    cwnd_segments: np.ndarray
    srtt_s: np.ndarray
    delivery_rate_bps: np.ndarray
    retransmits_total: np.ndarray


def tcp_state_series(run_dir: str | os.PathLike) -> list[TcpStateSeries]:
    """One :class:`TcpStateSeries` per (flow, connection) of the run ([] without records);
    times from the run's first sample, on the run's one clock."""
    t = tcp_state(run_dir)
    if t is None:
        return []
    cols = {k: t.column(k).to_numpy(zero_copy_only=False) for k in
            ("flow_id", "connection", "time_s", "cwnd_segments", "srtt_s", "retransmits_total")}
    rate = t.column("delivery_rate_bps").cast(pa.float64()).fill_null(np.nan).to_numpy()
    origin = float(np.min(cols["time_s"]))
    keys = np.stack([cols["flow_id"].astype(np.int64), cols["connection"].astype(np.int64)], axis=1)
    out = []
    for fid, conn in sorted({(int(a), int(b)) for a, b in keys}):
        m = (keys[:, 0] == fid) & (keys[:, 1] == conn)
        out.append(TcpStateSeries(fid, conn, cols["time_s"][m] - origin,
                                  cols["cwnd_segments"][m].astype(float), cols["srtt_s"][m].astype(float),
                                  rate[m], cols["retransmits_total"][m].astype(float)))
    return out
