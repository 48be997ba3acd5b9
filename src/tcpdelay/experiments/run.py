"""The testbed backend: run one scenario once (one seed) on real Linux TCP in namespaces.

:func:`run_scenario` is a :data:`tcpdelay.experiments.sweep.CellRunner`. It

1. plans the hosts (:func:`plan_run`, pure): the media and cross-traffic *senders* are grouped
   by their host-wide TCP settings (congestion control, initial window, SACK, RACK, TLP, ...),
   one host per group on the sending side; every receiving end of a side shares one sink host.
   Forward flows send left -> right (the emulator's ``a_to_b``), reverse flows right -> left;
2. builds the testbed (:class:`tcpdelay.testbed.Testbed`) with the scenario's path, the run's
   seed for the emulator's loss processes;
3. starts the receivers and cross-traffic servers and sinks, then at the run's start instant
   ``t0`` the media senders (:func:`tcpdelay.transport.run_sender`) and the cross-traffic
   clients, each at its own start offset;
4. writes, in ``run_dir`` as the run goes: ``scenario.toml`` and ``environment.json`` (kernel,
   TCP settings read back from every host, the testbed's layout) first; the per-packet records
   of every media flow (``sent/``, ``received/``: one Parquet dataset, :mod:`tcpdelay.records`;
   each flow's sender and receiver write into ``flows/<flow_id>/`` and the parts move into the
   dataset every second and at the end); at the end per-flow summaries (``flows.parquet``),
   the link emulator's counters and ``run.json``, and every applicable metric of
   :func:`tcpdelay.metrics.summary.summarize_run` (``metrics.json``).

A run that loses a part is failed (:class:`RunFailed`, naming the part): while waiting, the
processes are looked at every :data:`WATCH_EVERY_S`; the emulator ending on its own, a process
killed or raising, a media receiver without a summary, a media sender or receiver that did not
run its course stop the run (what still runs is interrupted; records, ``flows.parquet`` and
``run.json`` with ``run.failed`` are kept) and raise. A sender's drain timeout is a measurement.

Timing: the emulator's clock starts when the testbed comes up. When the link's behaviour
depends on that clock (outages, a delivery trace), the run's ``t0`` is :data:`LEAD_S` seconds
later (measured with the emulator's own ``elapsed_s`` counter) and the outages of the scenario
(seconds from ``t0``) are shifted by the same lead, so they land where the scenario puts them
relative to the media; otherwise ``t0`` is as soon as every process is started. All hosts share
CLOCK_MONOTONIC, so one-way delays are exact.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from tcpdelay import timing
from tcpdelay.errors import ParameterError, TcpdelayError
from tcpdelay.experiments.scenario import (
    BulkCross, Flow, PageLoadCross, ResolvedDirection, Scenario, Tcp, UdpCross,
    WebOnOffCross, dump_scenario,
)

#: Seconds from the emulator's start to the run's t0 (room to start receivers and servers).
LEAD_S = 2.0
#: Seconds a media sender waits for its queues to drain after its last packet.
DRAIN_S = 5.0
MEDIA_PORT = 20_000
CROSS_TCP_PORT = 30_000
CROSS_UDP_PORT = 40_000
FLOWS_FILE = "flows.parquet"
METRICS_FILE = "metrics.json"
ENVIRONMENT_FILE = "environment.json"

# Host-wide TCP settings of a Tcp table (the rest are per-socket options).
_HOST_KEYS = ("congestion_control", "initcwnd_segments", "sack", "rack", "tlp", "slow_start_after_idle",
              "no_metrics_save", "ecn")

FLOWS_SCHEMA = pa.schema([
    ("flow_id", pa.int32()),
    ("name", pa.string()),
    ("kind", pa.string()),          # media | bulk | web_onoff | page_load | udp
    ("direction", pa.string()),     # forward | reverse
    ("transport", pa.string()),     # tcp | udp
    ("start_s", pa.float64()),      # seconds after t0
    ("packets_sent", pa.int64()),   # media and udp; -1 where not counted
    ("packets_received", pa.int64()),
    ("bytes_received", pa.int64()),
    ("goodput_bps", pa.float64()),
    ("status", pa.string()),
])


class RunFailed(TcpdelayError):
    """A part of the run (the link emulator, a media sender or receiver, a cross-traffic
    process) died or never reported, so the run is not a measurement of the scenario. What it
    measured until then is kept in its directory (records, ``run.json`` with ``failed``)."""

    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("the run lost a part: " + "; ".join(self.reasons))


def derive_seed(seed: int, *parts: Any) -> int:
    """A seed for one random process of a run (a flow's source, a web flow's on/off draws, a
    start-time draw), independent of the others and fixed by the run's seed."""
    digest = hashlib.sha256(("/".join(map(str, (seed, *parts)))).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


# --------------------------------------------------------------------------- planning


def host_tcp_settings(tcp: Tcp) -> dict:
    """The host-wide part of a flow's TCP table: the preset with the overrides on top, as
    :class:`tcpdelay.testbed.TcpSettings` fields (None = leave the kernel's value)."""
    from tcpdelay.testbed.spec import TcpSettings, preset

    base = preset(tcp.preset) if tcp.preset else TcpSettings()
    over = {k: getattr(tcp, k) for k in _HOST_KEYS if getattr(tcp, k) is not None}
    return base.merged(TcpSettings(**over)).model_dump(exclude_none=True)


@dataclass
class MediaPlan:
    flow_id: int
    name: str
    flow: Flow
    sender: str
    receiver: str
    port: int
    start_s: float
    stop_s: float
    seed: int


@dataclass
class CrossPlan:
    flow_id: int
    name: str
    kind: str
    cross: Any
    server: str        # the sending side's host
    client: str        # the receiving side's host
    port: int
    start_s: float
    stop_s: float
    seed: int


@dataclass
class RunPlan:
    hosts: list[dict]                  # HostSpec data
    link: dict                         # LinkSpec data
    media: list[MediaPlan] = field(default_factory=list)
    cross: list[CrossPlan] = field(default_factory=list)

    def testbed_spec(self, seed: int):
        from tcpdelay.testbed.spec import parse_spec

        return parse_spec({"hosts": self.hosts, "link": self.link, "seed": seed % (2**63)})


def _direction_spec(d: ResolvedDirection, lead_s: float) -> dict:
    # The keys given (no nulls): the plan's link data, which the testbed spec reads back.
    return d.to_link(lead_s).model_dump(mode="json", exclude_none=True)


def plan_run(scenario: Scenario, seed: int, *, lead_s: float = LEAD_S) -> RunPlan:
    """Hosts, link and the placement of every flow (no side effects; see the module doc)."""
    side_of = {"forward": ("left", "right"), "reverse": ("right", "left")}
    groups: dict[tuple[str, str], str] = {}      # (side, settings json) -> host name
    hosts: list[dict] = []
    sinks: dict[str, str] = {}

    def sender_host(side: str, tcp: Tcp | None) -> str:
        settings = host_tcp_settings(tcp) if tcp is not None else {}
        key = (side, json.dumps(settings, sort_keys=True))
        if key not in groups:
            name = f"{side[0]}tx{sum(1 for s, _ in groups if s == side)}"
            groups[key] = name
            hosts.append({"name": name, "side": side, "tcp": settings})
        return groups[key]

    def sink_host(side: str) -> str:
        if side not in sinks:
            sinks[side] = f"{side[0]}rx"
            hosts.append({"name": sinks[side], "side": side, "tcp": {}})
        return sinks[side]

    plan = RunPlan(hosts=hosts, link={
        "a_to_b": _direction_spec(scenario.path.direction("forward"), lead_s),
        "b_to_a": _direction_spec(scenario.path.direction("reverse"), lead_s),
    })
    flow_id = 0
    for i, f in enumerate(scenario.flows):
        tx_side, rx_side = side_of[f.direction]
        for k in range(f.count):
            name = scenario.flow_name(i) + (f"#{k}" if f.count > 1 else "")
            plan.media.append(MediaPlan(
                flow_id=flow_id, name=name, flow=f, sender=sender_host(tx_side, f.tcp if f.transport == "tcp" else None),
                receiver=sink_host(rx_side), port=MEDIA_PORT + flow_id, start_s=f.start_s,
                stop_s=f.stop_s if f.stop_s is not None else scenario.duration_s,
                seed=derive_seed(seed, "media", flow_id)))
            flow_id += 1
    udp_index = 0
    for j, c in enumerate(scenario.cross):
        tx_side, rx_side = side_of[c.direction]
        for k in range(c.count):
            spread = c.start_spread_s
            offset = 0.0
            if spread > 0:
                import numpy as np

                offset = float(np.random.default_rng(derive_seed(seed, "cross-start", j, k)).uniform(0.0, spread))
            tcp = getattr(c, "tcp", None)
            server = sender_host(tx_side, tcp)
            port = CROSS_TCP_PORT
            if isinstance(c, UdpCross):
                port = CROSS_UDP_PORT + udp_index
                udp_index += 1
            plan.cross.append(CrossPlan(
                flow_id=flow_id, name=f"cross{j}-{c.kind}" + (f"#{k}" if c.count > 1 else ""), kind=c.kind,
                cross=c, server=server, client=sink_host(rx_side), port=port,
                start_s=c.start_s + offset, stop_s=c.stop_s if c.stop_s is not None else scenario.duration_s,
                seed=derive_seed(seed, "cross", j, k)))
            flow_id += 1
    if len([h for h in hosts if h["side"] == "left"]) > 200 or len([h for h in hosts if h["side"] == "right"]) > 200:
        raise ParameterError("the scenario needs more than 200 hosts on one side")
    return plan


def media_source(flow: Flow):
    """The :mod:`tcpdelay.traffic` source of a media flow."""
    from tcpdelay.traffic import CbrSource, Mpeg4TesSource, VideoTraceSource, VoipOnOffSource
    from tcpdelay.traffic.profiles import RFC4571_PREFIX_BYTES

    p = flow.profile
    if p == "mpeg4-tes":
        return Mpeg4TesSource(mean_rate_bps=flow.rate_bps)
    if p == "video-trace":
        return VideoTraceSource(trace_file=flow.trace)
    size, interval = flow.cbr
    packet = size - RFC4571_PREFIX_BYTES   # profile sizes count the 2-byte RFC 4571 prefix
    if p == "voip-onoff":
        return VoipOnOffSource(packet_bytes=packet, interval_s=interval)
    return CbrSource(packet, interval, name=p or "cbr")


# --------------------------------------------------------------------------- in the hosts


def _media_sender(config, source, start_at: float):
    from tcpdelay.transport import run_sender

    while (left := start_at - time.monotonic()) > 0:
        time.sleep(min(left, 0.5))
    return run_sender(config, source).to_dict()


def _media_receiver(config):
    from tcpdelay.transport import run_receiver

    return [r.to_dict() for r in run_receiver(config)]


# --------------------------------------------------------------------------- the run


def _emulator_start(tb) -> float:
    """The monotonic instant the emulator's clock started (its ``elapsed_s`` counter)."""
    try:
        before = time.monotonic()
        counters = tb.link_counters()
        after = time.monotonic()
        return (before + after) / 2 - float(counters["elapsed_s"])
    except Exception:  # noqa: BLE001 - no counters: the testbed just came up
        return time.monotonic()


def environment(tb, plan: RunPlan) -> dict:
    """The machine and the settings as read back from every host."""
    def read(path: str) -> str | None:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return None

    from tcpdelay.testbed.emulator import find_binary

    return {
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "timer_slack_ns": timing.timer_slack_ns(),
        "clock_resolution_s": timing.clock_resolution_s(),
        "tcp_available_congestion_control": read("/proc/sys/net/ipv4/tcp_available_congestion_control"),
        "tcp_allowed_congestion_control": read("/proc/sys/net/ipv4/tcp_allowed_congestion_control"),
        "tcp_congestion_control_default": read("/proc/sys/net/ipv4/tcp_congestion_control"),
        "emulator": find_binary(),
        "testbed": tb.describe(),
        "link": json.loads(tb.spec.link.model_dump_json()),
        "hosts_requested": plan.hosts,
    }


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)


def consolidate(run_dir: Path) -> int:
    """Move the record parts of every flow (``flows/<id>/<kind>/part-*``) into the run's
    dataset (``<kind>/``). Parts are complete files (written then renamed), so moving them while
    writers go on is safe. Returns how many moved."""
    moved = 0
    for kind in ("sent", "received"):
        dest = run_dir / kind
        for part in sorted(run_dir.glob(f"flows/*/{kind}/part-*.parquet")):
            dest.mkdir(exist_ok=True)
            os.replace(part, dest / part.name)
            moved += 1
    return moved


class _Mover(threading.Thread):
    def __init__(self, run_dir: Path, every_s: float = 1.0):
        super().__init__(daemon=True)
        self.run_dir, self.every_s, self.stop = run_dir, every_s, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            try:
                consolidate(self.run_dir)
            except OSError:
                pass


def run_scenario(scenario: Scenario, seed: int, run_dir: str | os.PathLike, *,
                 on_progress: Callable[[float, float], None] | None = None) -> dict:
    """Run ``scenario`` once with ``seed`` into ``run_dir``; return the run's summary (also
    written to run.json). ``on_progress(elapsed_s, total_s)`` is called about once a second."""
    from tcpdelay.testbed import Testbed, require_testbed_environment
    from tcpdelay.testbed.emulator import find_binary

    require_testbed_environment()
    find_binary()
    rd = Path(run_dir)
    rd.mkdir(parents=True, exist_ok=True)
    (rd / "scenario.toml").write_text(dump_scenario(scenario))
    plan = plan_run(scenario, seed)
    spec = plan.testbed_spec(seed)
    mover = _Mover(rd)
    handles: dict[str, Any] = {}
    results: dict[str, Any] = {}
    started = time.time()
    with Testbed(spec) as tb:
        t_emu = _emulator_start(tb)
        _write_json(rd / ENVIRONMENT_FILE, environment(tb, plan))
        mover.start()
        try:
            t_recv = time.monotonic()
            _start_receivers(tb, scenario, plan, rd, handles)
            if _timed_link(scenario):
                t0 = t_emu + LEAD_S  # the outage schedule / trace was set relative to this
            else:
                # Starting the senders is the same kind of work as starting the receivers was, so
                # the time that took measures this machine now: a busy machine gets a later start
                # rather than a failed run.
                now = time.monotonic()
                t0 = now + max(0.3 + 0.02 * (len(plan.media) + 2 * len(plan.cross)), 2 * (now - t_recv))
            _start_all(tb, scenario, plan, rd, t0, handles)
            if time.monotonic() > t0:
                raise ParameterError(f"setting up the run took {time.monotonic() - t_emu:.2f} s, past its "
                                     f"start {t0 - t_emu:.2f} s after the emulator's; too many flows for this machine?")
            failures: dict[str, str] = {}
            if _wait_all(handles, results, t0, scenario.duration_s, on_progress,
                         watch=lambda: _dead_parts(tb, plan, handles, results), failures=failures):
                # A part was lost: name it, stop what still runs (its records are kept), fail.
                lost = _dead_parts(tb, plan, handles, results)
                lost += [f"{part_name(k, plan)} failed: {e}" for k, e in failures.items()]
                results.update(_interrupt({k: h for k, h in handles.items() if k not in results}))
            else:
                lost = _lost_parts(tb, plan, results, failures)
            try:
                counters = tb.link_counters()
            except Exception:  # noqa: BLE001 - the emulator is gone: the run failed already
                if not lost:
                    raise
                counters = None
        except BaseException:
            _interrupt({k: h for k, h in handles.items() if k not in results})
            raise
        finally:
            mover.stop.set()
            mover.join()
            consolidate(rd)
    summary = _summarize(scenario, seed, plan, results, counters, t0, t_emu, started)
    if lost:
        summary["failed"] = lost
    _write_flows(rd, plan, results)
    from tcpdelay.records import read_run_metadata, write_run_metadata

    meta = read_run_metadata(rd)
    meta.update({"clock": "shared-monotonic", "clock_source": "CLOCK_MONOTONIC", "run": summary,
                 "duration_s": scenario.duration_s, "tcp_stats": _tcp_stats(summary)})
    if plan.cross:  # the metrics' jitter filter takes its base delay from the 2 s before this
        meta["cross_traffic_start_s"] = t0 + min(c.start_s for c in plan.cross)
    write_run_metadata(rd, meta)
    if lost:
        raise RunFailed(lost)
    totals = summary["totals"]
    try:
        from tcpdelay.metrics.summary import summarize_run

        metrics = _plain(summarize_run(rd))
        _write_json(rd / METRICS_FILE, metrics)
        names = {m.flow_id: m.name for m in plan.media}
        totals["flows"] = [
            {"flow_id": f["flow_id"], "name": names.get(f["flow_id"]),
             "delay_mean_s": f["delay"].get("mean_s"), "delay_std_s": f["delay"].get("std_s"),
             "delay_p95_s": f["delay"].get("p95_s"), "loss_rate": f["packets"].get("loss_rate")}
            for f in metrics.get("flows", [])]
    except Exception as err:  # noqa: BLE001 - the measurement stands; the metrics can be redone
        totals["metrics_error"] = f"{type(err).__name__}: {err}"
    return totals


def _tcp_stats(summary: dict) -> list[dict]:
    """Per media connection: TCP_INFO at the end (run.json ``tcp_stats``, read by the metrics)."""
    out = []
    for m in summary["media"]:
        for conn, info in enumerate(m["sender"].get("tcp_info_end") or []):
            out.append({"flow_id": m["flow_id"], "connection": conn, **info})
    return out


def _plain(value: Any) -> Any:
    """JSON types only (NumPy scalars unwrapped, non-finite floats as null)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _timed_link(scenario: Scenario) -> bool:
    """Whether the link's behaviour depends on time since the emulator started (outages, a
    delivery trace): then t0 is a fixed lead after the emulator's start."""
    return any(d.outages or d.trace for d in (scenario.path.direction("forward"), scenario.path.direction("reverse")))


def _start_receivers(tb, scenario: Scenario, plan: RunPlan, rd: Path, handles: dict) -> None:
    from tcpdelay.transport import ReceiverConfig, TcpOptions

    for m in plan.media:
        f = m.flow
        fd = rd / "flows" / str(m.flow_id)
        fd.mkdir(parents=True, exist_ok=True)
        rx_opts = TcpOptions(rcvbuf_bytes=f.tcp.rcvbuf_bytes)
        cfg = ReceiverConfig(listen_host=tb.hosts[m.receiver].address, listen_port=m.port, out_dir=str(fd),
                             runs=1, idle_timeout_s=max(10.0, 2 * scenario.duration_s), tcp=rx_opts,
                             handshake_timeout_s=10.0, udp_linger_s=1.0)
        handles[f"rx:{m.flow_id}"] = tb.hosts[m.receiver].spawn(_media_receiver, cfg)


def _start_all(tb, scenario: Scenario, plan: RunPlan, rd: Path, t0: float, handles: dict) -> None:
    from tcpdelay.traffic import bulk, page_load, response_server, udp_background, web_onoff
    from tcpdelay.transport import RunParams, SenderConfig, TcpOptions

    end = t0 + scenario.duration_s
    # Servers and sinks first (clients retry connecting until they are up).
    servers = sorted({c.server for c in plan.cross if c.kind != "udp"})
    for host in servers:
        handles[f"server:{host}"] = tb.hosts[host].spawn(
            response_server.serve, CROSS_TCP_PORT, duration_s=end + 1.0 - time.monotonic())
    for c in plan.cross:
        if c.kind == "udp":
            handles[f"sink:{c.flow_id}"] = tb.hosts[c.client].spawn(
                udp_background.sink, c.port, duration_s=end + 1.0 - time.monotonic())
    # Then every sending end, each waiting for its own start instant.
    for m in plan.media:
        f = m.flow
        h = f.heuristics
        tcp = f.tcp
        cfg = SenderConfig(
            to_host=tb.hosts[m.receiver].address, to_port=m.port,
            run=RunParams(transport=f.transport, connections=h.connections, split=h.split,
                          duration_s=m.stop_s - m.start_s, flow_id=m.flow_id, source=m.name[:64]),
            scheduler=h.scheduler,
            tcp=TcpOptions(nodelay=True if tcp.nodelay is None else tcp.nodelay,
                           notsent_lowat_bytes=tcp.notsent_lowat_bytes,
                           sndbuf_bytes=tcp.sndbuf_bytes, rcvbuf_bytes=tcp.rcvbuf_bytes),
            proactive_drop_delay_s=h.proactive_drop_s, keepalive=h.keepalive,
            seed=m.seed, out_dir=str(rd / "flows" / str(m.flow_id)), run_id=f"flow{m.flow_id}",
            connect_timeout_s=10.0, drain_timeout_s=DRAIN_S)
        handles[f"tx:{m.flow_id}"] = tb.hosts[m.sender].spawn(_media_sender, cfg, media_source(f), t0 + m.start_s)
    for c in plan.cross:
        x = c.cross
        srv = tb.hosts[c.server].address
        start_at, dur = t0 + c.start_s, c.stop_s - c.start_s
        cc = x.tcp.congestion_control if hasattr(x, "tcp") else None
        if isinstance(x, BulkCross):
            h = tb.hosts[c.client].spawn(bulk.client, srv, c.port, duration_s=dur, size_bytes=x.size_bytes,
                                         congestion_control=cc, start_at=start_at, drain_s=2.0)
        elif isinstance(x, WebOnOffCross):
            h = tb.hosts[c.client].spawn(web_onoff.client, srv, c.port, duration_s=dur, on_mean_s=x.on_mean_s,
                                         off_mean_s=x.off_mean_s, packet_size_bytes=x.packet_size_bytes,
                                         seed=c.seed, congestion_control=cc, start_at=start_at,
                                         mode=x.mode, gap_mean_s=x.gap_mean_s)
        elif isinstance(x, PageLoadCross):
            h = tb.hosts[c.client].spawn(page_load.client, srv, c.port, connections=x.connections,
                                         total_bytes=x.total_bytes, duration_s=dur, congestion_control=cc,
                                         start_at=start_at)
        else:
            assert isinstance(x, UdpCross)
            sink = tb.hosts[c.client].address
            h = tb.hosts[c.server].spawn(udp_background.send, sink, c.port, rate_bps=x.rate_bps, duration_s=dur,
                                         packet_size_bytes=x.packet_size_bytes, start_at=start_at)
        handles[f"cross:{c.flow_id}"] = h


def _interrupt(handles: dict, grace_s: float = 2.0) -> dict:
    """Ask every process of the run still running (``handles`` not yet collected, so their pids
    are still ours) to stop — SIGINT, as Ctrl-C would — and give them ``grace_s`` to write what
    they hold (the last record parts) before the testbed kills what is left. Returns what they
    answered (or their error) by handle key."""
    import contextlib
    import signal

    for h in handles.values():
        with contextlib.suppress(ProcessLookupError, OSError):
            os.kill(h.pid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    out: dict[str, Any] = {}
    for key, h in handles.items():
        try:
            out[key] = h.result(timeout_s=max(0.01, deadline - time.monotonic()))
        except Exception as err:  # noqa: BLE001 - what is left is killed with the testbed
            out[key] = {"error": _one_line(err)}
    return out


#: Seconds between two looks at the run's processes while waiting (a lost part is noticed within this).
WATCH_EVERY_S = 0.5


def _one_line(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text}"


def _wait_all(handles: dict, results: dict, t0: float, duration_s: float,
              on_progress: Callable[[float, float], None] | None, *,
              watch: Callable[[], list[str]] | None = None, failures: dict | None = None) -> bool:
    """Collect every process's result into ``results``. Every :data:`WATCH_EVERY_S` ``watch()``
    names the parts lost so far (a process killed, the emulator gone); as soon as it names one,
    or a process fails (raises, dies, or outlives the run's end: its error goes into
    ``failures`` by key), waiting stops and True is returned (with ``watch``; without it every
    process is waited for). False: every process answered."""
    total = duration_s + DRAIN_S
    stop = threading.Event()
    failures = {} if failures is None else failures

    def tick() -> None:
        while not stop.wait(1.0):
            on_progress(min(max(0.0, time.monotonic() - t0), total), total)

    ticker = threading.Thread(target=tick, daemon=True) if on_progress else None
    if ticker:
        ticker.start()
    try:
        # Senders first (they end with their flows), then receivers, clients, servers, sinks.
        order = sorted(handles, key=lambda k: ("tx", "cross", "rx", "sink", "server").index(k.split(":")[0]))
        end = t0 + duration_s + DRAIN_S + 15.0
        for key in order:
            deadline = max(end, time.monotonic() + 1.0)
            while True:
                try:
                    results[key] = handles[key].result(
                        timeout_s=max(0.01, min(WATCH_EVERY_S, deadline - time.monotonic())))
                    break
                except TimeoutError as err:
                    if time.monotonic() < deadline:
                        if watch is not None and watch():
                            return True
                        continue
                    failures[key] = _one_line(err)
                except Exception as err:  # noqa: BLE001 - recorded; the run fails
                    failures[key] = _one_line(err)
                results[key] = {"error": failures[key]}
                break
            if key in failures and watch is not None:
                return True
        return False
    finally:
        stop.set()
        if on_progress:
            on_progress(total, total)


def part_name(key: str, plan: RunPlan) -> str:
    """A handle key (``tx:0``, ``rx:0``, ``cross:3``, ``sink:3``, ``server:ltx1``) in words."""
    kind, _, ident = key.partition(":")
    if kind == "server":
        return f"cross-traffic server on host {ident}"
    fid = int(ident)
    media = {m.flow_id: m for m in plan.media}
    cross = {c.flow_id: c for c in plan.cross}
    if kind == "tx":
        m = media[fid]
        return f"media sender of flow {fid} '{m.name}' (host {m.sender})"
    if kind == "rx":
        m = media[fid]
        return f"media receiver of flow {fid} '{m.name}' (host {m.receiver})"
    c = cross[fid]
    if kind == "sink":
        return f"cross-traffic UDP sink of flow {fid} '{c.name}' (host {c.client})"
    if c.kind == "udp":
        return f"cross-traffic UDP sender of flow {fid} '{c.name}' (host {c.server})"
    return f"cross-traffic client of flow {fid} '{c.name}' (host {c.client})"


def _emulator_reason(tb) -> str | None:
    how = tb.emulator_died()
    return f"the link emulator tcpdelay-link (pid {tb.emulator_pid}) {how} during the run" if how else None


def _dead_parts(tb, plan: RunPlan, handles: dict, results: dict) -> list[str]:
    """The parts lost while the run goes on: the emulator ended, or a process ended abnormally
    (killed by a signal: it never sends its result)."""
    lost = []
    emu = _emulator_reason(tb)
    if emu:
        lost.append(emu)
    for key, h in handles.items():
        if key in results:
            continue
        how = h.died()
        if how:
            lost.append(f"{part_name(key, plan)} {how}")
    return lost


#: Sender endings that mean the flow did not run its course (a drain timeout is a measurement:
#: the path could not deliver the queue in DRAIN_S).
_SENDER_LOST = ("interrupted", "receiver-disconnected", "connection-lost")


def _lost_parts(tb, plan: RunPlan, results: dict, failures: dict) -> list[str]:
    """After every process answered: what makes the run not a measurement of the scenario."""
    lost = []
    emu = _emulator_reason(tb)
    if emu:
        lost.append(emu)
    for key, err in failures.items():
        lost.append(f"{part_name(key, plan)} failed: {err}")
    for m in plan.media:
        tx, rx = results.get(f"tx:{m.flow_id}"), results.get(f"rx:{m.flow_id}")
        if isinstance(tx, dict) and tx.get("status") in _SENDER_LOST:
            lost.append(f"{part_name(f'tx:{m.flow_id}', plan)} ended with status {tx['status']}"
                        + (f" ({tx['error']})" if tx.get("error") else ""))
        elif isinstance(tx, dict) and tx.get("status") == "completed" and not tx.get("receiver"):
            # (after a drain timeout the receiver may still be reading: no summary is expected)
            lost.append(f"{part_name(f'tx:{m.flow_id}', plan)} got no summary from the receiver"
                        + (f" ({tx['error']})" if tx.get("error") else ""))
        if f"rx:{m.flow_id}" in failures:
            continue
        if not rx:
            lost.append(f"{part_name(f'rx:{m.flow_id}', plan)} sent no summary (no run of the flow reached it)")
            continue
        rx = rx[0] if isinstance(rx, list) else rx
        tx_status = tx.get("status") if isinstance(tx, dict) else None
        ok = rx.get("status") == "completed" or (rx.get("status") == "sender-disconnected"
                                                 and tx_status == "drain-timeout")
        if not ok:
            lost.append(f"{part_name(f'rx:{m.flow_id}', plan)} ended with status {rx.get('status')}")
    return lost


def _receiver_summary(results: dict, flow_id: int) -> dict:
    """The media receiver's summary of its (first) run; ``{}`` when it has none (it returns a
    list of runs, empty when no media reached it, or nothing at all when it died)."""
    rx = results.get(f"rx:{flow_id}", {})
    if isinstance(rx, list):
        rx = rx[0] if rx else {}
    return rx if isinstance(rx, dict) else {}


def _summarize(scenario, seed, plan, results, counters, t0, t_emu, started) -> dict:
    media = []
    for m in plan.media:
        tx = results.get(f"tx:{m.flow_id}", {})
        rx = _receiver_summary(results, m.flow_id)
        media.append({"flow_id": m.flow_id, "name": m.name, "sender_host": m.sender, "receiver_host": m.receiver,
                      "start_s": m.start_s, "stop_s": m.stop_s, "seed": m.seed, "sender": tx, "receiver": rx})
    cross = []
    for c in plan.cross:
        cross.append({"flow_id": c.flow_id, "name": c.name, "kind": c.kind, "server_host": c.server,
                      "client_host": c.client, "start_s": c.start_s, "stop_s": c.stop_s, "seed": c.seed,
                      "result": results.get(f"cross:{c.flow_id}", {}),
                      **({"sink": results.get(f"sink:{c.flow_id}", {})} if c.kind == "udp" else {})})
    servers = {k.split(":", 1)[1]: v for k, v in results.items() if k.startswith("server:")}
    errors = [f"{k}: {v['error']}" for k, v in results.items() if isinstance(v, dict) and v.get("error")]
    errors += [f"tx:{x['flow_id']}: status {x['sender'].get('status')}" for x in media
               if x["sender"].get("status") not in (None, "completed")]
    totals = {
        "media_flows": len(plan.media),
        "cross_flows": len(plan.cross),
        "packets_sent": sum(int(x["sender"].get("packets", 0) or 0) for x in media),
        "packets_received": sum(int(x["receiver"].get("received_packets", 0) or 0) for x in media),
        "errors": errors,
        # e.g. a response cut at a server's max_response_bytes: recorded, never silent
        "warnings": [f"server:{h}: {w}" for h, v in servers.items() if isinstance(v, dict)
                     for w in v.get("warnings", [])],
        "link_drops": {d: counters.get(d, {}).get("drops") for d in ("a_to_b", "b_to_a")} if counters else None,
    }
    return {"scenario": scenario.name, "seed": seed, "started_unix_s": started, "lead_s": LEAD_S,
            "t0_monotonic_s": t0, "emulator_start_monotonic_s": t_emu, "duration_s": scenario.duration_s,
            "hosts": plan.hosts, "media": media, "cross": cross, "cross_servers": servers,
            "link_counters": counters, "totals": totals}


def _write_flows(rd: Path, plan: RunPlan, results: dict) -> None:
    rows: dict[str, list] = {n: [] for n in FLOWS_SCHEMA.names}

    def add(**row) -> None:
        for n in FLOWS_SCHEMA.names:
            rows[n].append(row[n])

    for m in plan.media:
        tx = results.get(f"tx:{m.flow_id}", {})
        rx = _receiver_summary(results, m.flow_id)
        elapsed = tx.get("elapsed_s") or 0.0
        got = int(rx.get("received_bytes", 0) or 0)
        add(flow_id=m.flow_id, name=m.name, kind="media", direction=m.flow.direction, transport=m.flow.transport,
            start_s=m.start_s, packets_sent=int(tx.get("packets", 0) or 0),
            packets_received=int(rx.get("received_packets", 0) or 0), bytes_received=got,
            goodput_bps=got * 8 / elapsed if elapsed else 0.0,
            status=tx.get("status") or ("error" if tx.get("error") else "unknown"))
    for c in plan.cross:
        r = results.get(f"cross:{c.flow_id}", {})
        sink = results.get(f"sink:{c.flow_id}", {})
        if c.kind == "udp":
            got = int(sink.get("bytes", 0) or 0)
            add(flow_id=c.flow_id, name=c.name, kind=c.kind, direction=c.cross.direction, transport="udp",
                start_s=c.start_s, packets_sent=int(r.get("packets", 0) or 0),
                packets_received=int(sink.get("packets", 0) or 0), bytes_received=got,
                goodput_bps=got * 8 / max(c.stop_s - c.start_s, 1e-9),
                status="error" if r.get("error") or sink.get("error") else "completed")
        else:
            got = int(r.get("bytes", 0) or 0)
            add(flow_id=c.flow_id, name=c.name, kind=c.kind, direction=c.cross.direction, transport="tcp",
                start_s=c.start_s, packets_sent=-1, packets_received=-1, bytes_received=got,
                goodput_bps=float(r.get("goodput_bps") or got * 8 / max(c.stop_s - c.start_s, 1e-9)),
                status="error" if r.get("error") else ("completed" if r.get("complete", True) else "incomplete"))
    pq.write_table(pa.table(rows, schema=FLOWS_SCHEMA), rd / FLOWS_FILE)
