"""The bottleneck's queue over a run: average and peak length per direction, from its
queue-length trace (the ``link_queue`` records: the emulator's ``queue_file``, or ns-3's
sampled queue), over the run's own window.

Papadimitriou and Tsaoussidis (papers/004) report Reno's *average queue length* at the
bottleneck (Tables 1-2: e.g. 8.8 packets with a 50-packet buffer, 16.1 with 80, at 20 flows)
and its trace over time (Figs 24-26). The samples are the instantaneous length at evenly spaced
times, so their mean estimates the time-average; the window is [t0, t0 + duration] on the link's
clock, leaving out the lead before the flows and the drain after them.
"""

from __future__ import annotations

import numpy as np

from tcpdelay.checks import non_negative_float


def queue_summary(direction, time_s, packets, size_bytes, start_s: float, end_s: float) -> dict[str, dict]:
    """Per direction, over samples with ``start_s <= time_s <= end_s``: ``mean_packets``,
    ``max_packets``, ``mean_bytes``, ``max_bytes``, ``samples``; a direction without samples in
    the window is left out. Arrays of equal length; times in seconds on the link's clock."""
    start_s = non_negative_float("start_s", start_s)
    end_s = non_negative_float("end_s", end_s)
    direction = np.asarray(direction)
    time_s, packets, size_bytes = (np.asarray(x, dtype=float) for x in (time_s, packets, size_bytes))
    if not direction.shape == time_s.shape == packets.shape == size_bytes.shape:
        raise ValueError("direction, time_s, packets and size_bytes must have the same length")
    out: dict[str, dict] = {}
    inside = (time_s >= start_s) & (time_s <= end_s)
    for d in sorted(set(direction.tolist())):
        sel = inside & (direction == d)
        if not sel.any():
            continue
        out[str(d)] = {"mean_packets": float(packets[sel].mean()), "max_packets": int(packets[sel].max()),
                       "mean_bytes": float(size_bytes[sel].mean()), "max_bytes": int(size_bytes[sel].max()),
                       "samples": int(sel.sum())}
    return out
