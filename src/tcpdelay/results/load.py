"""Read a result directory back: every run of a sweep, a ``tcpdelay run`` directory or one run
(:func:`tcpdelay.results.layout.find_runs`), measured again from its packets.

Every complete run with per-packet records (``sent/`` and ``received/`` as the run wrote them,
or else the compact ``packets.parquet`` of :mod:`tcpdelay.results.packets`, the one that is
committed) is measured again from them with :func:`tcpdelay.metrics.summary.summarize_flows`
(the same numbers as its ``metrics.json``, plus the quality levels over time). A complete run
measured before runs kept ``packets.parquet`` has its per-run figures from its ``metrics.json``
and its packets' delays from a ``delays`` packets file where they survived
(``RunData.packets``). A run that is not complete (interrupted, or failed: listed with its
error) is left out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from tcpdelay.errors import ParameterError
from tcpdelay.metrics import delay as dl
from tcpdelay.metrics.summary import MetricOptions, summarize_flows, without_voice_metrics
from tcpdelay.records import read_run_metadata
from tcpdelay.results.layout import METRICS_FILE, RUN_METADATA, find_runs, has_records, seed_of
from tcpdelay.results.markers import read_media_run_status, read_status
from tcpdelay.results.packets import load_flows, read_run_packets
from tcpdelay.results.runs import media_flow_names, media_profiles, read_metrics_checked
from tcpdelay.results.testbed_error import Verdict, run_section, verdict

#: Bin of the quality-over-time series (s).
QUALITY_BIN_S = 0.5


@dataclass
class FlowRun:
    """One media flow of one run: its per-packet delays (NaN = not received) and metrics."""

    flow_id: int
    name: str
    delay_s: np.ndarray | None
    """None when the run's per-packet delays were never kept (its metrics are from metrics.json)."""
    send_time_s: np.ndarray | None
    dropped: np.ndarray | None
    metrics: dict


@dataclass
class RunData:
    seed: int | None
    run_dir: Path
    status: str
    """complete | failed | incomplete (no complete.json: interrupted or still running)"""
    error: str | None = None
    flows: list[FlowRun] = field(default_factory=list)
    jain_index: float | None = None
    wall_s: float | None = None
    packets: str = "none"
    """Where the per-packet data came from: records (sent/ and received/, or packets.parquet of
    kind records: metrics recomputed) | delays (a delays-only packets.parquet; metrics from
    metrics.json) | none (metrics.json only)"""
    streams: list[dict] = field(default_factory=list)
    """The run's pulled streams as its ``metrics.json`` has them (the player's discards,
    underflows...; :func:`tcpdelay.results.runs.stream_metrics`)."""
    warnings: list[str] = field(default_factory=list)
    """What could not be read of a run that is still reported (e.g. a damaged ``metrics.json``
    of a run whose packet records give its flows' metrics)."""
    testbed: Verdict | None = None
    """The run's own error judged (:func:`tcpdelay.results.testbed_error.run_verdict`; not
    recorded for runs from before it was, and for simulations); None for a run not complete."""
    testbed_section: dict | None = None
    """The run's ``testbed_error`` section as recorded (None: not recorded)."""


@dataclass
class CellData:
    id: str
    label: str
    overrides: dict
    runs: list[RunData]


@dataclass
class Results:
    path: Path
    kind: str
    """sweep | run (a tcpdelay run directory with seed-*/) | single (one run directory)"""
    name: str
    cells: list[CellData]


def load_results(path: str | os.PathLike, opts: MetricOptions | None = None,
                 progress: Callable[[int, int], None] | None = None) -> Results:
    """Read every run under ``path`` (a sweep, a ``tcpdelay run`` directory or one run);
    ``progress(done, total)`` is called after each run is read."""
    layout = find_runs(path)
    opts = opts or MetricOptions(series=True, series_bin_s=QUALITY_BIN_S)
    total = len(layout.run_dirs())
    done = 0
    cells = []
    for c in layout.cells:
        runs = []
        for d in c.runs:
            runs.append(_load_run(d, opts))
            done += 1
            if progress is not None:
                progress(done, total)
        cells.append(CellData(c.id, c.label, dict(c.overrides), runs))
    return Results(layout.root, layout.kind, layout.name, cells)


def _load_run(run_dir: Path, opts: MetricOptions) -> RunData:
    marks = read_status(run_dir)
    if marks.status == "incomplete" and (run_dir / RUN_METADATA).is_file():
        try:   # a tcpdelay send/recv run: no complete.json; its ends' statuses say how it ended
            marks = read_media_run_status(run_dir, read_run_metadata(run_dir))
        except (OSError, ValueError, ParameterError):
            pass
    run = RunData(seed_of(run_dir), run_dir, marks.status, marks.error, wall_s=marks.wall_s)
    if marks.status != "complete":
        return run  # partial records of an interrupted or failed run are not a result
    run.testbed_section = run_section(run_dir)
    run.testbed = verdict(run.testbed_section, run_dir)
    names = media_flow_names(run_dir)
    try:
        metrics = read_metrics_checked(run_dir)
    except ParameterError as err:   # a damaged metrics.json: named; the run's records may still serve
        metrics = None
        run.warnings.append(str(err))
    run.streams = [st for st in (metrics or {}).get("streams") or [] if isinstance(st, dict) and "flow_id" in st]
    try:
        if has_records(run_dir):
            flows, meta = load_flows(run_dir)  # the records as the run wrote them
            run.packets = "records"
        else:
            stored = read_run_packets(run_dir)
            if stored is not None and stored.kind == "records":
                flows, meta = stored.flows, read_run_metadata(run_dir)
                run.packets = "records"
            else:
                if metrics is None and run.warnings:   # what it would be measured from is damaged
                    raise ParameterError(run.warnings[0])
                return _load_from_metrics(run, names, stored, metrics)
    except ParameterError as err:
        run.status, run.error = "failed", str(err)
        return run
    summary = summarize_flows(flows, meta, opts, media_profiles(run_dir, meta))
    for fp, m in zip(flows, summary["flows"]):
        run.flows.append(FlowRun(fp.flow_id, names.get(fp.flow_id, f"flow{fp.flow_id}"),
                                 fp.delay_s, fp.send_time_s, fp.dropped, m))
    run.jain_index = summary["fairness"]["jain_index_goodput"]
    return run


def _load_from_metrics(run: RunData, names: dict[int, str], stored, metrics: dict | None) -> RunData:
    """A complete run without per-packet records (measured before runs kept ``packets.parquet``):
    its metrics from ``metrics.json``, its delays from a ``delays`` packets file when there is
    one (else no per-packet delays: ``run.packets == "none"``)."""
    delays = {f.flow_id: f for f in stored.flows} if stored is not None else {}
    if metrics is None and not delays:
        run.status = "failed"
        run.error = "complete, but neither per-packet records (sent/, received/, packets.parquet) nor metrics.json are there"
        return run
    if metrics is not None:
        flows = metrics.get("flows") or []
        if not isinstance(flows, list) or not all(isinstance(m, dict) and "flow_id" in m for m in flows):
            raise ParameterError(f"{str(run.run_dir / METRICS_FILE)!r}: 'flows' is not a list of flows")
        profiles = media_profiles(run.run_dir, {})   # a video flow's G.711 MOS of old metrics.json goes
        per_flow = {int(m["flow_id"]): without_voice_metrics(m, profiles.get(int(m["flow_id"])))
                    for m in flows}  # media flows only
        run.jain_index = (metrics.get("fairness") or {}).get("jain_index_goodput") \
            if isinstance(metrics.get("fairness"), dict) else None
    else:  # only the delays survive: the delay statistics and loss from them
        per_flow = {fid: _metrics_from_delays(f.delay_s) for fid, f in delays.items()}
    run.packets = "delays" if delays else "none"
    for fid in sorted(set(per_flow) | set(delays)):
        d = delays.get(fid)
        m = per_flow.get(fid) or _metrics_from_delays(d.delay_s)
        run.flows.append(FlowRun(fid, names.get(fid, f"flow{fid}"),
                                 d.delay_s if d is not None else None,
                                 d.send_time_s if d is not None else None,
                                 np.zeros(d.delay_s.size, bool) if d is not None else None, m))
    return run


def _metrics_from_delays(delay_s: np.ndarray) -> dict:
    """The per-run figures that per-packet delays alone give (the rest: None)."""
    n = int(delay_s.size)
    got = int(np.count_nonzero(np.isfinite(delay_s)))
    return {"delay": dl.delay_stats(delay_s), "packets": {"loss_rate": (n - got) / n if n else None,
                                                           "sent": n, "received": got},
            "rtpi": {}, "goodput_bps": None, "tcp_retransmissions": None}
