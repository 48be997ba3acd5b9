"""The record of one run, written into its directory the same way whichever backend ran it.

* ``scenario.toml``: the scenario as run (:func:`write_scenario`), first;
* ``environment.json``: where the run happened (:func:`write_environment`; the machine's part
  from :func:`machine_environment`, the rest from the backend), as soon as the backend is up;
* ``sent/``, ``received/``: the per-packet records (:mod:`tcpdelay.records`), written by the
  flows into ``flows/<flow_id>/`` and moved into the run's dataset by :func:`consolidate`
  (every second while the run goes, :class:`RecordMover`, and at the end);
* ``flows.parquet``: one row per flow (:data:`FLOWS_SCHEMA`), and ``run.json``'s ``run`` summary,
  ``tcp_stats`` and clock (:func:`write_run_record`), at the end, also for a failed run;
* ``metrics.json``: every applicable metric of :func:`tcpdelay.results.runs.summarize_run`
  (:func:`write_metrics`), for a run that lost no part.

Every file is written under a temporary name and renamed into place
(:mod:`tcpdelay.atomic_file`): a run killed mid-write leaves the old file or none, never half of
one, and a write that fails (a full disk) names the file.
"""

from __future__ import annotations

import os
import platform
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tcpdelay import timing
from tcpdelay.atomic_file import write_atomic, write_text_atomic
from tcpdelay.experiments.backends.base import BackendOutcome
from tcpdelay.experiments.plan import RunPlan
from tcpdelay.experiments.scenario import Scenario, dump_scenario
from tcpdelay.jsonio import jsonable, write_json

from tcpdelay.results.layout import ENVIRONMENT_FILE, FLOWS_FILE, METRICS_FILE, RECORD_KINDS, SCENARIO_FILE

FLOWS_SCHEMA = pa.schema([
    ("flow_id", pa.int32()),
    ("name", pa.string()),
    ("kind", pa.string()),          # media | bulk | web_onoff | page_load | transfers | udp | http_video
    ("direction", pa.string()),     # forward | reverse
    ("transport", pa.string()),     # tcp | udp
    ("start_s", pa.float64()),      # seconds after t0
    ("packets_sent", pa.int64()),   # media and udp; -1 where not counted
    ("packets_received", pa.int64()),
    ("bytes_received", pa.int64()),
    ("goodput_bps", pa.float64()),
    ("status", pa.string()),
])


def write_scenario(run_dir: Path, scenario: Scenario) -> None:
    write_text_atomic(run_dir / SCENARIO_FILE, dump_scenario(scenario))


def machine_environment() -> dict:
    """The machine running the run: kernel, Python, CPUs and the timer's resolution."""
    return {
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "timer_slack_ns": timing.timer_slack_ns(),
        "clock_resolution_s": timing.clock_resolution_s(),
    }


def write_environment(run_dir: Path, env: dict) -> None:
    write_json(run_dir / ENVIRONMENT_FILE, env)


def consolidate(run_dir: Path) -> int:
    """Move the record parts of every flow (``flows/<id>/<kind>/part-*``) into the run's
    dataset (``<kind>/``). Parts are complete files (written then renamed), so moving them while
    writers go on is safe. Returns how many moved."""
    moved = 0
    for kind in RECORD_KINDS:
        dest = run_dir / kind
        for part in sorted(run_dir.glob(f"flows/*/{kind}/part-*.parquet")):
            dest.mkdir(exist_ok=True)
            os.replace(part, dest / part.name)
            moved += 1
    return moved


class RecordMover(threading.Thread):
    """:func:`consolidate` every ``every_s`` seconds until ``stop`` is set."""

    def __init__(self, run_dir: Path, every_s: float = 1.0):
        super().__init__(daemon=True)
        self.run_dir, self.every_s, self.stop = run_dir, every_s, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            try:
                consolidate(self.run_dir)
            except OSError:
                pass


def receiver_summary(results: dict, flow_id: int) -> dict:
    """The media receiver's summary of its (first) run; ``{}`` when it has none (it returns a
    list of runs, empty when no media reached it, or nothing at all when it died)."""
    rx = results.get(f"rx:{flow_id}", {})
    if isinstance(rx, list):
        rx = rx[0] if rx else {}
    return rx if isinstance(rx, dict) else {}


def summarize(plan: RunPlan, outcome: BackendOutcome) -> dict:
    """``run.json``'s ``run``: the plan with every part's answer, the link's counters, totals."""
    results, counters = outcome.results, outcome.counters
    media = [{"flow_id": m.flow_id, "name": m.name, "sender_host": m.sender, "receiver_host": m.receiver,
              "start_s": m.start_s, "stop_s": m.stop_s, "seed": m.seed,
              "sender": results.get(f"tx:{m.flow_id}", {}), "receiver": receiver_summary(results, m.flow_id)}
             for m in plan.media]
    cross = [{"flow_id": c.flow_id, "name": c.name, "kind": c.kind, "server_host": c.server,
              "client_host": c.client, "start_s": c.start_s, "stop_s": c.stop_s, "seed": c.seed,
              "result": results.get(f"cross:{c.flow_id}", {}),
              **({"sink": results.get(f"sink:{c.flow_id}", {})} if c.transport == "udp" else {})}
             for c in plan.cross]
    streams = [{"flow_id": st.flow_id, "name": st.name, "kind": st.stream.kind, "player_kind": st.stream.player,
                "catch_up": st.stream.catch_up,
                "rebuffer_bytes": st.stream.rebuffer_bytes or st.stream.playout_buffer_bytes // 2,
                "server_host": st.server, "client_host": st.client, "port": st.port, "start_s": st.start_s,
                "stop_s": st.stop_s, "player": results.get(f"play:{st.flow_id}", {}),
                "server": results.get(f"httpd:{st.flow_id}", {}), "tcp_state": results.get(f"state:{st.flow_id}", {})}
               for st in plan.streams]
    servers = {k.split(":", 1)[1]: v for k, v in results.items() if k.startswith("server:")}
    errors = [f"{k}: {v['error']}" for k, v in results.items() if isinstance(v, dict) and v.get("error")]
    errors += [f"tx:{x['flow_id']}: status {x['sender'].get('status')}" for x in media
               if x["sender"].get("status") not in (None, "completed")]
    totals = {
        "media_flows": len(plan.media),
        "cross_flows": len(plan.cross),
        "streams": len(plan.streams),
        "packets_sent": sum(int(x["sender"].get("packets", 0) or 0) for x in media),
        "packets_received": sum(int(x["receiver"].get("received_packets", 0) or 0) for x in media),
        "errors": errors,
        # e.g. a response cut at a server's max_response_bytes: recorded, never silent
        "warnings": [f"server:{h}: {w}" for h, v in servers.items() if isinstance(v, dict)
                     for w in v.get("warnings", [])],
        "link_drops": {d: counters.get(d, {}).get("drops") for d in ("a_to_b", "b_to_a")} if counters else None,
    }
    return {"scenario": plan.name, "seed": plan.seed, "started_unix_s": outcome.started_unix_s, "lead_s": plan.lead_s,
            "t0_monotonic_s": outcome.t0_monotonic_s,
            "emulator_start_monotonic_s": outcome.link_start_monotonic_s, "duration_s": plan.duration_s,
            "hosts": plan.hosts, "media": media, "cross": cross, "streams": streams, "cross_servers": servers,
            "link_counters": counters, "totals": totals}


def write_flows(run_dir: Path, plan: RunPlan, results: dict) -> None:
    """``flows.parquet``: one row per media and cross-traffic flow (:data:`FLOWS_SCHEMA`)."""
    rows: list[dict] = []
    add = rows.append
    for m in plan.media:
        tx = results.get(f"tx:{m.flow_id}", {})
        rx = receiver_summary(results, m.flow_id)
        elapsed = tx.get("elapsed_s") or 0.0
        got = int(rx.get("received_bytes", 0) or 0)
        add(dict(flow_id=m.flow_id, name=m.name, kind="media", direction=m.flow.direction, transport=m.flow.transport,
            start_s=m.start_s, packets_sent=int(tx.get("packets", 0) or 0),
            packets_received=int(rx.get("received_packets", 0) or 0), bytes_received=got,
            goodput_bps=got * 8 / elapsed if elapsed else 0.0,
            status=tx.get("status") or ("error" if tx.get("error") else "unknown")))
    for c in plan.cross:
        r = results.get(f"cross:{c.flow_id}", {})
        sink = results.get(f"sink:{c.flow_id}", {})
        if c.transport == "udp":
            got = int(sink.get("bytes", 0) or 0)
            add(dict(flow_id=c.flow_id, name=c.name, kind=c.kind, direction=c.cross.direction, transport="udp",
                start_s=c.start_s, packets_sent=int(r.get("packets", 0) or 0),
                packets_received=int(sink.get("packets", 0) or 0), bytes_received=got,
                goodput_bps=got * 8 / max(c.stop_s - c.start_s, 1e-9),
                status="error" if r.get("error") or sink.get("error") else "completed"))
        else:
            got = int(r.get("bytes", 0) or 0)
            add(dict(flow_id=c.flow_id, name=c.name, kind=c.kind, direction=c.cross.direction, transport="tcp",
                start_s=c.start_s, packets_sent=-1, packets_received=-1, bytes_received=got,
                goodput_bps=float(r.get("goodput_bps") or got * 8 / max(c.stop_s - c.start_s, 1e-9)),
                status="error" if r.get("error") else ("completed" if r.get("complete", True) else "incomplete")))
    for st in plan.streams:
        r = results.get(f"play:{st.flow_id}", {})
        got = int(r.get("body_bytes", 0) or 0)
        span = (r.get("end_s") or 0.0) - (r.get("first_byte_s") or r.get("end_s") or 0.0)
        add(dict(flow_id=st.flow_id, name=st.name, kind=st.stream.kind, direction=st.stream.direction, transport="tcp",
            start_s=st.start_s, packets_sent=-1, packets_received=-1, bytes_received=got,
            goodput_bps=got * 8 / span if span > 0 else 0.0,
            status="error" if r.get("error") else ("completed" if r.get("complete") else "incomplete")))
    table = pa.Table.from_pylist(rows, schema=FLOWS_SCHEMA)
    write_atomic(run_dir / FLOWS_FILE, lambda tmp: pq.write_table(table, tmp))  # never half a file


def tcp_stats(summary: dict) -> list[dict]:
    """Per media connection: TCP_INFO at the end (run.json ``tcp_stats``, read by the metrics)."""
    return [{"flow_id": m["flow_id"], "connection": conn, **info}
            for m in summary["media"] for conn, info in enumerate(m["sender"].get("tcp_info_end") or [])]


def write_run_record(run_dir: Path, plan: RunPlan, outcome: BackendOutcome) -> dict:
    """``flows.parquet`` and ``run.json`` (the summary, with ``failed`` naming the lost parts
    of a failed run); returns the summary."""
    from tcpdelay.records import read_run_metadata, write_run_metadata

    summary = summarize(plan, outcome)
    if outcome.lost:
        summary["failed"] = outcome.lost
    write_flows(run_dir, plan, outcome.results)
    meta = read_run_metadata(run_dir)
    meta.update({"clock": outcome.clock, "clock_source": outcome.clock_source, "run": summary,
                 "duration_s": plan.duration_s, "tcp_stats": tcp_stats(summary)})
    if outcome.clock_detail is not None:
        meta["clock_offset"] = outcome.clock_detail
    if outcome.testbed_error is not None:   # the run's own error (tcpdelay.results.testbed_error)
        meta["testbed_error"] = outcome.testbed_error
    if plan.cross:  # the metrics' jitter filter takes its base delay from the 2 s before this
        meta["cross_traffic_start_s"] = outcome.t0_monotonic_s + min(c.start_s for c in plan.cross)
    write_run_metadata(run_dir, meta)
    return summary


def write_metrics(run_dir: Path, plan: RunPlan, totals: dict) -> dict:
    """``metrics.json``, and each media flow's delay and loss into ``totals["flows"]``; a metric
    that fails is ``totals["metrics_error"]`` (the measurement stands; the metrics can be redone).
    Returns ``totals``."""
    try:
        from tcpdelay.results.runs import summarize_run
        from tcpdelay.results.testbed_error import add_smallest_delay

        metrics = jsonable(summarize_run(run_dir))
        metrics.pop("results", None)   # where the run was measured (a node's temporary directory on Ray)
        write_json(run_dir / METRICS_FILE, metrics)
        add_smallest_delay(run_dir, metrics)     # the scale of the testbed error's bound
        names = {m.flow_id: m.name for m in plan.media}
        totals["flows"] = [
            {"flow_id": f["flow_id"], "name": names.get(f["flow_id"]),
             "delay_mean_s": f["delay"].get("mean_s"), "delay_std_s": f["delay"].get("std_s"),
             "delay_p95_s": f["delay"].get("p95_s"), "loss_rate": f["packets"].get("loss_rate")}
            for f in metrics.get("flows", [])]
    except Exception as err:  # noqa: BLE001 - the measurement stands; the metrics can be redone
        totals["metrics_error"] = f"{type(err).__name__}: {err}"
    return totals
