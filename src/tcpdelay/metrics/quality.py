"""The loss-period quality metric of the interactive-audio-over-HSPA study (*Interactive audio
vs. concurrent TCP on a cellular (HSPA) access link*, §II-B, Table I).

Combining pure and delayed losses (:mod:`tcpdelay.metrics.jitter_filter`), each audio packet is
given a level by the loss period it belongs to:

====== =====================================================
level  Table I
====== =====================================================
0      no loss (the packet was played)
1      20 ms gap in the stream, no adjacent packet lost
2      40–60 ms of the stream was lost
3      80–100 ms of the stream was lost
4      120–180 ms of the stream was lost
5      200+ ms of the stream was lost
====== =====================================================

A loss period of ``n`` consecutive unusable packets (in sequence order) covers ``n * interval``
of the stream. Level 1 is a single packet lost with both neighbours played; for longer periods
the table's ranges are read as upper bounds (``<= 60 ms`` -> 2, ``<= 100 ms`` -> 3,
``<= 180 ms`` -> 4, more -> 5), which reproduces the table exactly for the paper's 20 ms packets
and extends it to other intervals. Levels 0 and 1 together are "acceptable" quality (any loss
has no adjacent packet lost; §II-B, Fig. 3).
"""

from __future__ import annotations

import numpy as np

from tcpdelay import checks

LEVELS = (0, 1, 2, 3, 4, 5)
#: Upper bounds (seconds of stream lost) of levels 2, 3, 4; longer periods are level 5.
LEVEL_UPPER_S = ((2, 0.060), (3, 0.100), (4, 0.180))
ACCEPTABLE_MAX_LEVEL = 1


def loss_runs(missing) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of every run of consecutive True values."""
    m = np.asarray(missing, bool).astype(np.int8)
    edges = np.diff(np.concatenate([[0], m, [0]]))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    return starts, ends - starts


def level_of_period(n_packets, interval_s: float) -> np.ndarray:
    """Table I level of a loss period of ``n_packets`` consecutive packets."""
    checks.positive("interval_s", interval_s)
    n = np.asarray(n_packets)
    dur = n * interval_s
    lvl = np.full(n.shape, 5, dtype=np.int8)
    for level, upper in reversed(LEVEL_UPPER_S):
        lvl[dur <= upper + 1e-9] = level
    lvl[n == 1] = 1
    lvl[n <= 0] = 0
    return lvl


def loss_period_levels(unusable, interval_s: float = 0.020) -> np.ndarray:
    """Level (0–5) of every packet, in sequence order; ``unusable`` is True for a pure or a
    delayed loss."""
    u = np.asarray(unusable, bool)
    levels = np.zeros(u.shape, dtype=np.int8)
    starts, lengths = loss_runs(u)
    for s, n, lvl in zip(starts, lengths, level_of_period(lengths, interval_s)):
        levels[s:s + n] = lvl
    return levels


def level_summary(levels) -> dict:
    """Packets at each level and the acceptable fraction (levels 0–1)."""
    lv = np.asarray(levels)
    n = lv.size
    counts = {str(k): int(np.count_nonzero(lv == k)) for k in LEVELS}
    acceptable = int(np.count_nonzero(lv <= ACCEPTABLE_MAX_LEVEL))
    return {"packets": int(n), "level_counts": counts,
            "acceptable_fraction": acceptable / n if n else None,
            "worst_level": int(lv.max()) if n else None}


def quality_over_time(time_s, levels, bin_s: float = 0.1, t0_s: float = 0.0) -> dict:
    """Per time bin of ``bin_s`` (bins start at ``t0_s``; packets before it are left out): the
    bin's start relative to ``t0_s``, its packets, its worst level, its mean level and its
    acceptable fraction. Empty bins are left out. ``time_s`` is normally the send time."""
    checks.positive("bin_s", bin_s)
    t = np.asarray(time_s, dtype=float)
    lv = np.asarray(levels)
    keep = np.isfinite(t) & (t >= t0_s)
    t, lv = t[keep], lv[keep]
    if t.size == 0:
        return {"bin_start_s": [], "packets": [], "worst_level": [], "mean_level": [],
                "acceptable_fraction": []}
    b = np.floor((t - t0_s) / bin_s).astype(np.int64)
    bins, inv, count = np.unique(b, return_inverse=True, return_counts=True)
    worst = np.zeros(bins.size, np.int64)
    np.maximum.at(worst, inv, lv.astype(np.int64))
    mean = np.bincount(inv, weights=lv.astype(float)) / count
    acc = np.bincount(inv, weights=(lv <= ACCEPTABLE_MAX_LEVEL).astype(float)) / count
    return {"bin_start_s": bins * bin_s, "packets": count, "worst_level": worst,
            "mean_level": mean, "acceptable_fraction": acc}
