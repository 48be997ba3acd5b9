"""Readers of one run directory's summary files: ``run.json`` (the run's parameters, clock,
link counters and the sender's TCP statistics; :mod:`tcpdelay.records`), ``flows.parquet``
(one row per flow), ``metrics.json``, and the run's metrics computed again from its packets.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tcpdelay.errors import ParameterError
from tcpdelay.metrics.summary import MetricOptions, summarize_flows
from tcpdelay.records import read_run_metadata
from tcpdelay.results.layout import FLOWS_FILE, METRICS_FILE, RUN_METADATA
from tcpdelay.results.packets import load_flows

__all__ = ["flow_rows", "media_flow_names", "queue_metrics", "read_metrics", "run_metadata", "summarize_run"]


def run_metadata(run_dir: str | os.PathLike) -> dict:
    """The run's ``run.json`` ({} when it has none)."""
    return read_run_metadata(run_dir)


def run_json(run_dir: str | os.PathLike) -> dict:
    """The run's ``run.json``; raises ParameterError when it is missing or not JSON."""
    path = Path(run_dir) / RUN_METADATA
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ParameterError(f"{str(path)!r} cannot be read ({err})") from None


def flow_rows(run_dir: str | os.PathLike) -> list[dict]:
    """The rows of the run's ``flows.parquet`` (``flow_id, name, kind, ...``)."""
    import pyarrow.parquet as pq

    return pq.read_table(Path(run_dir) / FLOWS_FILE).to_pylist()


def media_flow_names(run_dir: str | os.PathLike) -> dict[int, str]:
    """Flow id -> name of the run's media flows, from ``flows.parquet`` ({} without the file; a
    damaged file only loses the names)."""
    if not (Path(run_dir) / FLOWS_FILE).is_file():
        return {}
    try:
        rows = flow_rows(run_dir)
    except Exception:  # a damaged summary file only loses the names
        return {}
    return {int(r["flow_id"]): str(r["name"]) for r in rows if r.get("kind") in (None, "media")}


def read_metrics(run_dir: str | os.PathLike) -> dict | None:
    """The run's ``metrics.json`` (None when it is missing or unreadable)."""
    try:
        return json.loads((Path(run_dir) / METRICS_FILE).read_text())
    except (OSError, ValueError):
        return None


def summarize_run(run_dir: str | os.PathLike, sent_dir: str | os.PathLike | None = None,
                  opts: MetricOptions | None = None) -> dict:
    """Metrics of the run in ``run_dir`` (``sent_dir``: the sender's records, when elsewhere):
    :func:`tcpdelay.metrics.summary.summarize_flows` over :func:`tcpdelay.results.packets.load_flows`."""
    streams = stream_metrics(run_dir)
    if streams and not (Path(run_dir) / "sent").is_dir() and sent_dir is None:
        # a run of pulled streams only (no media flows): their metrics are the run's
        return {"flows": [], "streams": streams, "results": str(run_dir)}
    if (not streams and sent_dir is None and not any((Path(run_dir) / k).is_dir() for k in ("sent", "received"))
            and _cross_only(run_dir)):
        # cross traffic only (papers/004 §4.1's FTP reference): no media flow, the bottleneck's queue
        meta = read_run_metadata(run_dir)
        out = {"clock": meta.get("clock"), "flows": [], "fairness": {"flows": 0, "jain_index_goodput": None}}
    else:
        flows, meta = load_flows(run_dir, sent_dir)
        out = summarize_flows(flows, meta, opts)
    if streams:
        out["streams"] = streams
    queue = queue_metrics(run_dir, meta)
    if queue:
        out["queue"] = queue
    out["results"] = str(run_dir)
    if sent_dir is not None:
        out["sent_results"] = str(sent_dir)
    return out


def _cross_only(run_dir: str | os.PathLike) -> bool:
    """The run had cross traffic and no media flow (its flows.parquet says so)."""
    path = Path(run_dir) / FLOWS_FILE
    if not path.is_file():
        return False
    import pyarrow.parquet as pq

    kinds = pq.read_table(path, columns=["kind"]).column("kind").to_pylist()
    return bool(kinds) and "media" not in kinds


def queue_metrics(run_dir: str | os.PathLike, meta: dict | None = None) -> dict:
    """The bottleneck's average and peak queue per direction over the run's window (its
    ``link_queue`` records; :func:`tcpdelay.metrics.queue.queue_summary`); {} without records."""
    from tcpdelay.metrics.queue import queue_summary
    from tcpdelay.records import read_records

    table = read_records(run_dir, "link_queue")
    if table.num_rows == 0:
        return {}
    run = (meta if meta is not None else read_run_metadata(run_dir)).get("run", {})
    t0_link_s = (run.get("t0_monotonic_s") or 0.0) - (run.get("emulator_start_monotonic_s") or 0.0)
    duration_s = run.get("duration_s") or 0.0
    cols = table.to_pydict()
    return queue_summary(cols["direction"], cols["time_s"], cols["packets"], cols["bytes"],
                         max(t0_link_s, 0.0), max(t0_link_s, 0.0) + duration_s)


def stream_metrics(run_dir: str | os.PathLike) -> list[dict]:
    """Per pulled stream of the run: the model player's picture discards and underflows from its
    ``playout`` log (:func:`tcpdelay.metrics.playout.stream_playout`), or VLC's own counters
    (``frames_displayed``, ``frames_lost`` — its picture discards — and its buffering episodes
    after the first — its underflows); and the server's retransmitted segments (the largest ``retransmits_total`` of
    each of its connections in ``tcp_state``, summed)."""
    import numpy as np

    from tcpdelay.metrics.playout import stream_playout
    from tcpdelay.records import read_records

    try:
        streams = read_run_metadata(run_dir).get("run", {}).get("streams", [])
    except (OSError, ValueError):
        streams = []
    has_log = (Path(run_dir) / "playout").is_dir()
    log = read_records(run_dir, "playout") if has_log else None
    ids = {int(x["flow_id"]): x for x in streams}
    if log is not None:
        for fid in set(log.column("flow_id").to_pylist()):
            ids.setdefault(int(fid), {"player_kind": "model"})
    if not ids:
        return []
    state = read_records(run_dir, "tcp_state").to_pydict()
    fid_s = np.asarray(state["flow_id"], dtype=np.int64)
    conn_s = np.asarray(state["connection"], dtype=np.int64)
    retr_s = np.asarray(state["retransmits_total"], dtype=np.int64)
    out = []
    for fid, st in sorted(ids.items()):
        if st.get("player_kind") == "vlc":
            p = st.get("player") or {}
            c = p.get("counters") or {}
            m = {"player": "vlc", "frames_displayed": c.get("frames_displayed"), "frames_lost": c.get("frames_lost"),
                 "picture_discards": c.get("frames_lost"), "video_decoded": c.get("video_decoded"),
                 "underflow_events": max(0, p["buffering_episodes"] - 1) if p.get("buffering_episodes") is not None else None,
                 "rebuffer_messages": p.get("rebuffer_messages"), "late_picture_messages": p.get("late_picture_messages"),
                 "end_of_stream": p.get("end_of_stream")}
        elif log is not None and fid in set(log.column("flow_id").to_pylist()):
            m = {"player": "model", **stream_playout(log, fid, catch_up=st.get("catch_up", "rebuffer"),
                                                     rebuffer_bytes=st.get("rebuffer_bytes", 328_000))}
        else:
            continue
        sel = fid_s == fid
        m["retransmits"] = int(sum(retr_s[sel & (conn_s == c)].max() for c in np.unique(conn_s[sel]))) if sel.any() else None
        out.append({"flow_id": int(fid), **m})
    return out
