"""What one run measured besides its media flows, read back from its files: timed transfers
(``run.json``: each ``transfers`` cross flow's per-transfer rows), cross traffic (``flows.parquet``
rows of other kinds, with a page load's time from ``run.json``), the bottleneck's queue (the
summary in ``metrics.json``; the trace from ``link_queue`` records when they are there), the
sender's TCP_INFO at the end (``run.json``'s ``tcp_stats``) and how many TCP state samples were
taken (``run.json``), for the report's sections of every kind of run.

A damaged or missing file loses only what it holds: the reader notes it in
:attr:`RunMeasures.problems` and goes on.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tcpdelay.results.layout import FLOWS_FILE, METRICS_FILE, RUN_METADATA

__all__ = ["MEDIA_KINDS", "QueueTrace", "RunMeasures", "TransferFlow", "queue_traces", "read_run_measures"]

#: flows.parquet kinds that are not cross traffic: media flows and pulled streams.
MEDIA_KINDS = ("media", "http_video")


@dataclass
class TransferFlow:
    """One ``transfers`` cross flow of a run: its name and per-transfer rows (``handshake_s``,
    ``transfer_s``, ``complete``, ``retransmits``, ``rtos``, ``syn_retransmits``, ``class``...)."""
    flow_id: int
    name: str
    rows: list[dict]


@dataclass
class RunMeasures:
    transfers: list[TransferFlow] = field(default_factory=list)
    cross: list[dict] = field(default_factory=list)
    """flows.parquet rows of cross traffic (``flow_id, name, kind, bytes_received, goodput_bps,
    status``), a page load's with ``page_load_time_s``."""
    queue: dict = field(default_factory=dict)
    """metrics.json's ``queue``: per direction ``mean_packets, max_packets, mean_bytes, max_bytes,
    samples`` ({} when the run kept no queue trace)."""
    tcp_stats: list[dict] = field(default_factory=list)
    """run.json's ``tcp_stats``: the sender's TCP_INFO of each connection at the run's end."""
    tcp_state_rows: int = 0
    """TCP state samples the run took (run.json), whether or not its records are still there."""
    flow_names: dict[int, str] = field(default_factory=dict)
    """Every flow's name (media and cross), from flows.parquet."""
    problems: list[str] = field(default_factory=list)


def _json(path: Path, problems: list[str]) -> dict:
    import json

    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        problems.append(f"{path}: not readable JSON ({err})")
        return {}
    if not isinstance(doc, dict):
        problems.append(f"{path}: not a JSON object")
        return {}
    return doc


def read_run_measures(run_dir: str | os.PathLike) -> RunMeasures:
    """The run's transfers, cross traffic, queue summary and TCP statistics (empty parts for what
    it did not measure)."""
    run_dir = Path(run_dir)
    out = RunMeasures()
    meta = _json(run_dir / RUN_METADATA, out.problems)
    run = meta.get("run") if isinstance(meta.get("run"), dict) else {}
    page_load_s: dict[int, float] = {}
    for c in run.get("cross") or []:
        res = c.get("result") if isinstance(c, dict) else None
        if not isinstance(res, dict):
            continue
        fid = int(c.get("flow_id", -1))
        if isinstance(res.get("tcp_state"), dict):
            out.tcp_state_rows += int(res["tcp_state"].get("rows") or 0)
        if c.get("kind") == "transfers" and isinstance(res.get("transfers"), list):
            out.transfers.append(TransferFlow(fid, str(c.get("name") or f"flow{fid}"),
                                              [t for t in res["transfers"] if isinstance(t, dict)]))
        if res.get("page_load_time_s") is not None:
            page_load_s[fid] = float(res["page_load_time_s"])
    for s in run.get("streams") or []:
        if isinstance(s, dict) and isinstance(s.get("tcp_state"), dict):
            out.tcp_state_rows += int(s["tcp_state"].get("rows") or 0)
    stats = meta.get("tcp_stats")
    out.tcp_stats = [s for s in stats if isinstance(s, dict)] if isinstance(stats, list) else []
    out.queue = {d: q for d, q in (_json(run_dir / METRICS_FILE, out.problems).get("queue") or {}).items()
                 if isinstance(q, dict)}
    if (run_dir / FLOWS_FILE).is_file():
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(run_dir / FLOWS_FILE).to_pylist()
        except Exception as err:  # a damaged summary file loses only its rows  # noqa: BLE001
            out.problems.append(f"{run_dir / FLOWS_FILE}: not readable ({err})")
            rows = []
        for r in rows:
            fid = int(r["flow_id"])
            out.flow_names[fid] = str(r.get("name"))
            if r.get("kind") in MEDIA_KINDS or r.get("kind") is None:
                continue
            row = {k: r.get(k) for k in ("flow_id", "name", "kind", "bytes_received", "goodput_bps", "status")}
            if fid in page_load_s:
                row["page_load_time_s"] = page_load_s[fid]
            out.cross.append(row)
    return out


@dataclass
class QueueTrace:
    """The bottleneck queue's length over time in one direction: ``t_s`` from the first sample."""
    direction: str
    t_s: np.ndarray
    packets: np.ndarray
    size_bytes: np.ndarray


def queue_traces(run_dir: str | os.PathLike) -> list[QueueTrace]:
    """The run's ``link_queue`` records, one trace per direction ([] without records)."""
    from tcpdelay.records import read_records

    t = read_records(run_dir, "link_queue")
    if t.num_rows == 0:
        return []
    cols = t.to_pydict()
    direction = np.asarray(cols["direction"])
    time_s = np.asarray(cols["time_s"], float)
    origin = float(np.min(time_s)) if time_s.size and math.isfinite(np.min(time_s)) else 0.0
    out = []
    for d in sorted(set(direction.tolist())):
        m = direction == d
        order = np.argsort(time_s[m], kind="stable")
        out.append(QueueTrace(str(d), time_s[m][order] - origin, np.asarray(cols["packets"], float)[m][order],
                              np.asarray(cols["bytes"], float)[m][order]))
    return out
