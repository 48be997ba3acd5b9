"""Readers of one run directory's summary files: ``run.json`` (the run's parameters, clock,
link counters and the sender's TCP statistics; :mod:`tcpdelay.records`), ``flows.parquet``
(one row per flow), ``metrics.json``, and the run's metrics computed again from its packets.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.metrics import delay as dl
from tcpdelay.metrics.summary import MetricOptions, summarize_flows, without_voice_metrics
from tcpdelay.records import read_run_metadata
from tcpdelay.results.layout import (CELLS_DIR, FLOWS_FILE, METRICS_FILE, PACKETS_FILE, RUN_METADATA, has_records,
                                     is_run_dir, seed_dirs)
from tcpdelay.results.packets import load_flows, read_run_packets

__all__ = ["flow_rows", "media_flow_names", "queue_metrics", "read_metrics", "read_metrics_checked", "run_metadata",
           "stream_metrics", "summarize_run", "transfer_metrics"]


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
    """The run's ``metrics.json``; None when it is missing or is not a JSON object (damaged,
    truncated, ``[]``, ``null``: :func:`read_metrics_checked` says which)."""
    try:
        return read_metrics_checked(run_dir)
    except ParameterError:
        return None


def read_metrics_checked(run_dir: str | os.PathLike) -> dict | None:
    """The run's ``metrics.json``; None when it has none. Raises ParameterError naming the file
    when it is there but is not a JSON object (damaged, truncated, ``[]``, ``null``)."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ParameterError(f"{str(path)!r} cannot be read ({err})") from None
    if not isinstance(doc, dict):
        raise ParameterError(f"{str(path)!r} is not a JSON object (it holds {type(doc).__name__})")
    return doc


#: ``sources`` values: where each part of :func:`summarize_run`'s answer came from.
FROM_RECORDS = "records (sent/, received/): recomputed"
FROM_PACKETS = "packets.parquet (kind records): recomputed"
FROM_DELAYS = "packets.parquet (kind delays): loss, delays and jitter only"
FROM_METRICS = "metrics.json (as measured when the run was recorded)"

#: Options of :class:`MetricOptions` whose values a stored metrics.json was computed with.
_STORED_OPTIONS = ("playout_delays_s", "jitter_buffer_s", "rtpi_threshold_s", "startup_delay_s", "buffer_bytes",
                   "codec", "cross_traffic_start_s", "fps")


def summarize_run(run_dir: str | os.PathLike, sent_dir: str | os.PathLike | None = None,
                  opts: MetricOptions | None = None) -> dict:
    """Metrics of the run in ``run_dir`` (``sent_dir``: the sender's records, when elsewhere),
    whatever kind of run it is and whatever it kept:

    - media flows (``flows``, each with its scenario ``name``):
      :func:`tcpdelay.metrics.summary.summarize_flows` over its records (``sent/`` and
      ``received/``) or its ``packets.parquet`` of kind ``records``; a committed run without them
      has its flows' metrics from its ``metrics.json`` (as measured when it was recorded, with
      the options stored there), or, without that, its loss and delays from a ``packets.parquet``
      of kind ``delays``;
    - ``transfers`` (timed transfers: handshake, transfer and total latency) from ``run.json``;
    - ``cross`` (every other flow's bytes, goodput and status) from ``flows.parquet``;
    - ``streams`` (pulled streams: the player's discards, underflows, startup) from the player's
      log or ``run.json``, else from ``metrics.json``;
    - ``queue`` (the bottleneck's queue) from its ``link_queue`` records, else ``metrics.json``.

    ``sources`` says where each part came from; ``warnings`` what could not be read (a damaged
    ``flows.parquet`` or ``run.json``, or a damaged ``metrics.json`` of a run whose packets give
    its numbers) and stored numbers that ignore ``opts``. Raises ParameterError when the run had
    media flows and kept neither their packets nor their metrics, and when the ``metrics.json``
    that holds a run's numbers (it kept no packet records) is damaged."""
    rd = Path(run_dir)
    opts = opts or MetricOptions()
    if not has_records(rd) and not is_run_dir(rd):
        several = sorted(rd.glob(f"{CELLS_DIR}/*/seed-*")) or seed_dirs(rd)
        if several:
            raise ParameterError(f"RESULTS: {str(rd)!r} holds {len(several)} runs; give one run directory "
                                 f"(e.g. {str(several[0])!r}), or use tcpdelay report for them all")
    warnings: list[str] = []
    sources: dict[str, str] = {}
    meta = _run_meta(rd, warnings)
    from tcpdelay.transport.runmeta import interrupted_note     # a killed receiver's run (issue 53)
    if (note := interrupted_note(meta)) is not None:
        warnings.append(note)
    rows = _flow_rows_or_warn(rd, warnings)
    stored_metrics = _Once(lambda: _metrics_or_warn(rd, warnings))
    if sent_dir is not None or has_records(rd):
        flows, meta = load_flows(rd, sent_dir)
        out = summarize_flows(flows, meta, opts, media_profiles(rd, meta))
        sources["flows"] = FROM_RECORDS
    else:
        stored = read_run_packets(rd)
        m = None
        if stored is None or stored.kind != "records":
            m = read_metrics_checked(rd)   # the run's own numbers: a damaged file is an error that names it
            stored_metrics = _Once(lambda: m)
        if stored is not None and stored.kind == "records":
            out = summarize_flows(stored.flows, meta, opts, media_profiles(rd, meta))
            sources["flows"] = FROM_PACKETS
        elif m is not None and m.get("flows"):
            out = {"clock": m.get("clock", meta.get("clock", "shared")),
                   "delay_relative_to_min": bool(m.get("delay_relative_to_min", False)),
                   "options": m.get("options") or {},
                   "flows": [without_voice_metrics(dict(f), media_profiles(rd, meta).get(int(f["flow_id"])))
                             for f in m["flows"]],
                   "fairness": m.get("fairness") or {"flows": len(m["flows"]), "jain_index_goodput": None}}
            sources["flows"] = FROM_METRICS + ("; its packets' delays are in packets.parquet (kind delays)"
                                               if stored is not None else "")
            differ = _options_differ(opts, out["options"])
            if differ:
                warnings.append(f"the flows' metrics are metrics.json's, computed with its own {', '.join(differ)}; "
                                "the values given here apply only to a run with its packet records")
        elif stored is not None:
            out = _summary_from_delays(stored.flows, meta, opts)
            sources["flows"] = FROM_DELAYS
        elif _had_media(rows, meta, m):
            raise ParameterError(f"{str(rd)!r} has no packet records (expected sent/ and received/ Parquet parts "
                                 f"written by tcpdelay send/recv, or {PACKETS_FILE}) and no {METRICS_FILE} with "
                                 "its flows' metrics")
        else:   # no media flow: transfers, pulled streams or cross traffic only
            out = {"clock": meta.get("clock", (m or {}).get("clock", "shared")), "delay_relative_to_min": False,
                   "options": _options_dict(opts), "flows": [], "fairness": {"flows": 0, "jain_index_goodput": None}}
    names = _media_names(rows, meta)
    for f in out["flows"]:
        f["name"] = names.get(int(f["flow_id"]), f"flow{f['flow_id']}")
    transfers = transfer_metrics(meta)
    if transfers:
        out["transfers"] = transfers
        sources["transfers"] = RUN_METADATA
    cross = [{k: r.get(k) for k in ("flow_id", "name", "kind", "direction", "transport", "start_s", "packets_sent",
                                    "packets_received", "bytes_received", "goodput_bps", "status")}
             for r in rows or [] if r.get("kind") not in (None, "media")]
    if cross:
        out["cross"] = cross
        sources["cross"] = FLOWS_FILE
    streams = stream_metrics(rd)
    if streams:
        sources["streams"] = "playout records and run.json"
    elif (stored_metrics() or {}).get("streams"):
        streams = list(stored_metrics()["streams"])
        sources["streams"] = FROM_METRICS
    if streams:
        st_names = {int(x["flow_id"]): x.get("name") for x in (meta.get("run") or {}).get("streams") or []
                    if isinstance(x, dict) and "flow_id" in x}
        out["streams"] = [{**st, "name": st.get("name") or st_names.get(int(st["flow_id"]))
                           or f"stream{st['flow_id']}"} for st in streams]
    queue = queue_metrics(rd, meta)
    if queue:
        sources["queue"] = "link_queue records"
    elif (stored_metrics() or {}).get("queue"):
        queue = stored_metrics()["queue"]
        sources["queue"] = FROM_METRICS
    if queue:
        out["queue"] = queue
    out["sources"] = sources
    out["warnings"] = warnings
    out["results"] = str(run_dir)
    if sent_dir is not None:
        out["sent_results"] = str(sent_dir)
    return out


class _Once:
    """A value computed on first call, then kept."""

    def __init__(self, fn):
        self.fn, self.done, self.value = fn, False, None

    def __call__(self):
        if not self.done:
            self.value, self.done = self.fn(), True
        return self.value


def _options_dict(opts: MetricOptions) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(opts).items()}


def _run_meta(rd: Path, warnings: list[str]) -> dict:
    """``run.json`` ({} without one; {} and a warning when it cannot be read)."""
    try:
        meta = read_run_metadata(rd)
    except (OSError, ValueError) as err:
        warnings.append(f"{str(rd / RUN_METADATA)!r} cannot be read ({err}): the run's parameters are unknown")
        return {}
    if not isinstance(meta, dict):
        warnings.append(f"{str(rd / RUN_METADATA)!r} is not a JSON object: the run's parameters are unknown")
        return {}
    return meta


def _flow_rows_or_warn(rd: Path, warnings: list[str]) -> list[dict] | None:
    """``flows.parquet``'s rows; None when it is missing, None and a warning when it is damaged."""
    path = rd / FLOWS_FILE
    if not path.is_file():
        return None
    try:
        return flow_rows(rd)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        warnings.append(f"{str(path)!r} cannot be read ({type(err).__name__}: {' '.join(str(err).split())[:200]}): "
                        "the flows' names and the cross traffic it lists are missing")
        return None


def _metrics_or_warn(rd: Path, warnings: list[str]) -> dict | None:
    try:
        return read_metrics_checked(rd)
    except ParameterError as err:
        warnings.append(str(err))
        return None


def _had_media(rows: list[dict] | None, meta: dict, metrics: dict | None) -> bool:
    """Whether the run had media flows (True when nothing says it had none)."""
    if rows is not None:
        return any(r.get("kind") in (None, "media") for r in rows)
    run = meta.get("run")
    if isinstance(run, dict) and isinstance(run.get("media"), list):
        return bool(run["media"])
    if metrics is not None and isinstance(metrics.get("flows"), list):
        return bool(metrics["flows"])
    return True


def _media_names(rows: list[dict] | None, meta: dict) -> dict[int, str]:
    """Flow id -> the scenario's name of each media flow: flows.parquet's, else run.json's."""
    names = {int(m["flow_id"]): str(m["name"]) for m in (meta.get("run") or {}).get("media") or []
             if isinstance(m, dict) and m.get("name") is not None and "flow_id" in m}
    names.update({int(r["flow_id"]): str(r["name"]) for r in rows or []
                  if r.get("kind") in (None, "media") and r.get("name") is not None})
    return names


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b)
    return a == b


def _options_differ(opts: MetricOptions, stored: dict) -> list[str]:
    """The options (as flags) whose values ``stored`` (a metrics.json's ``options``) differ from."""
    out = []
    for k in _STORED_OPTIONS:
        if k not in stored:
            continue
        mine = getattr(opts, k)
        if k == "buffer_bytes" and mine == math.inf:
            mine = None   # JSON has no infinity: unlimited is null
        if not _same(mine, stored[k]):
            out.append("--playout-delay-s" if k == "playout_delays_s" else f"--{k.replace('_', '-')}")
    return out


def _summary_from_delays(flows: list, meta: dict, opts: MetricOptions) -> dict:
    """What a ``delays`` packets file gives of each flow: loss, the delay statistics, the late
    and miss fractions and RFC 3550 jitter (when the send times were kept); what needs the
    packets' sizes, frames or exact send times (RTPI, goodput, jitter filter, E-model, video) is
    None or absent."""
    pd = np.asarray(opts.playout_delays_s)
    per_flow = []
    for f in flows:
        delay = np.asarray(f.delay_s, float)
        lost = ~np.isfinite(delay)
        send = np.asarray(f.send_time_s, float)
        ok = np.isfinite(send) & ~lost
        jitter = None
        if ok.sum() >= 2:
            j = dl.interarrival_jitter(send[ok], send[ok] + delay[ok])
            jitter = float(j[-1]) if j.size else None
        per_flow.append({
            "flow_id": int(f.flow_id), "kind": "stream", "inferred_from_received": False,
            "packets": {**dl.loss_summary(lost, np.zeros(delay.size, bool)), "received": int(np.count_nonzero(~lost)),
                        "dropped_by_sender": None, "duplicates": None, "unmatched_received": None,
                        "bytes_received": None},
            "delay": {**dl.delay_stats(delay), "relative_to_min": meta.get("clock") == "unsynchronized",
                      "clock_offset_s": 0.0},
            "jitter_rfc3550_s": jitter,
            "late": {"playout_delay_s": list(opts.playout_delays_s),
                     "late_fraction": dl.late_fraction(delay, pd).tolist(),
                     "miss_fraction": dl.miss_fraction(delay, pd).tolist(),
                     "target_late_fraction": opts.late_target,
                     "playout_delay_for_target_s": dl.playout_delay_for_late_fraction(delay, opts.late_target)},
            "rtpi": None, "goodput_bps": None, "tcp_retransmissions": None, "packet_interval_s": None,
        })
    return {"clock": meta.get("clock", "shared"), "delay_relative_to_min": meta.get("clock") == "unsynchronized",
            "options": _options_dict(opts), "flows": per_flow,
            "fairness": {"flows": len(per_flow), "jain_index_goodput": None}}


def transfer_metrics(meta: dict) -> list[dict]:
    """Per timed-transfers flow of the run (``run.json``'s ``run.cross`` of kind ``transfers``):
    :func:`tcpdelay.metrics.transfers.transfer_summary` with its ``flow_id`` and ``name``."""
    from tcpdelay.metrics.transfers import transfer_summary

    out = []
    for c in (meta.get("run") or {}).get("cross") or []:
        if not isinstance(c, dict) or c.get("kind") != "transfers":
            continue
        res = c.get("result") or {}
        rows = res.get("transfers") if isinstance(res, dict) else None
        if not isinstance(rows, list):
            continue
        out.append({"flow_id": c.get("flow_id"), "name": c.get("name"),
                    **transfer_summary([r for r in rows if isinstance(r, dict)])})
    return out


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


def media_profiles(run_dir: str | os.PathLike, meta: dict) -> dict[int, str]:
    """Flow id -> media profile of the run's media flows, where it is written down: the
    scenario's ``[[flows]]`` (the run's ``scenario.toml``, else that of the ``tcpdelay run``
    directory above it; ids in the scenario's order, ``count`` flows each, as the runner gives
    them), else a ``tcpdelay send``/``recv`` run's source in ``run.json``. {} where neither
    says (a flow without a profile is left out)."""
    import tomllib

    rd = Path(run_dir)
    for sc in (rd / "scenario.toml", rd.parent / "scenario.toml"):
        if not sc.is_file():
            continue
        try:
            flows = tomllib.loads(sc.read_text()).get("flows") or []
            out, fid = {}, 0
            for f in flows:
                for _ in range(int(f.get("count", 1))):
                    if isinstance(f.get("profile"), str):
                        out[fid] = f["profile"]
                    fid += 1
            return out
        except (OSError, ValueError, TypeError, AttributeError):
            return {}
    out = {}
    for end in ("sender", "receiver"):
        params = (meta.get(end) or {}).get("params") if isinstance(meta.get(end), dict) else None
        if isinstance(params, dict) and isinstance(params.get("source"), str):
            out.setdefault(int(params.get("flow_id") or 0), params["source"])
    return out
