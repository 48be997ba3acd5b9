"""Summary of a run's timed transfers (:mod:`tcpdelay.traffic.transfers`, Cardwell et al.):
how many were made and completed, and the statistics of their handshake time (``L_h``), transfer
time (first write to the acknowledgement of the last byte) and total latency (handshake plus
transfer), with the retransmissions, timeouts and papers/001's classes over the transfers.
"""

from __future__ import annotations

import numpy as np

from tcpdelay.metrics.delay import delay_stats

__all__ = ["transfer_summary"]

#: The time columns summarized, each as :func:`tcpdelay.metrics.delay.delay_stats`.
TIMES = ("handshake_s", "transfer_s", "latency_s")


def _times(rows: list[dict], key: str) -> np.ndarray:
    out = []
    for r in rows:
        if key == "latency_s":
            h, t = r.get("handshake_s"), r.get("transfer_s")
            v = None if h is None or t is None else h + t
        else:
            v = r.get(key)
        out.append(np.nan if v is None else float(v))
    return np.asarray(out, dtype=float)


def _total(rows: list[dict], key: str) -> int | None:
    vals = [r.get(key) for r in rows if r.get(key) is not None]
    return int(sum(vals)) if vals else None


def transfer_summary(rows: list[dict]) -> dict:
    """``rows``: the per-transfer rows of one transfers flow (``handshake_s``, ``transfer_s``,
    ``complete``, ``retransmits``, ``rtos``, ``syn_retransmits``, ``class``...). Returns
    ``{"transfers", "complete", "incomplete", "handshake_s", "transfer_s", "latency_s"`` (each
    ``{"count", "mean_s", "std_s", "min_s", "max_s", "p50_s", "p95_s", "p99_s"}`` over the
    complete transfers that have it), ``"retransmits", "rtos", "syn_retransmits"`` (totals; None
    when never counted) and ``"classes"`` (transfers per class)``}``."""
    done = [r for r in rows if r.get("complete")]
    classes: dict[str, int] = {}
    for r in rows:
        if r.get("class") is not None:
            classes[str(r["class"])] = classes.get(str(r["class"]), 0) + 1
    return {"transfers": len(rows), "complete": len(done), "incomplete": len(rows) - len(done),
            **{k: delay_stats(_times(done, k)) for k in TIMES},
            "retransmits": _total(rows, "retransmits"), "rtos": _total(rows, "rtos"),
            "syn_retransmits": _total(rows, "syn_retransmits"), "classes": dict(sorted(classes.items()))}
