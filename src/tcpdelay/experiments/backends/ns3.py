"""The ns-3 backend: a run's plan simulated (ns-3 3.44 through its Python bindings), written as
the testbed writes a run — the same per-packet records, parts' answers, link counters — so the
metrics and the report cannot tell, except by ``run.json``'s clock (``ns3-simulation``).

It translates the plan into a simulation job (:mod:`tcpdelay.sim.job`): the hosts and their
TCP (Linux's defaults where ns-3's differ; the congestion control by the testbed's name), the
link's two directions as they are (the emulator's model runs inside the simulation), each media
flow's packets (from the same source, seed and times as on the testbed), the cross traffic (bulk,
web on/off, page loads as request/response over TCP; UDP at its rate).
What ns-3 or this backend cannot run is listed by :meth:`Ns3Backend.unsupported` — every item at
once — and refused in one :class:`~tcpdelay.errors.ParameterError` by ``check_plan``, before
anything is written: never a silent difference.

The job runs in this process's ns-3 worker (:func:`tcpdelay.sim.worker.shared_worker`: ns-3 is
imported once per process, each simulation is a forked child). Simulated time: the link's clock
starts at 0 and the flows at ``t0 = lead_s`` (outages and traces are shifted by the plan as for
the testbed), so a record's times are simulated seconds.
"""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import asdict

import numpy as np

from tcpdelay.errors import ParameterError, TcpdelayError
from tcpdelay.experiments.backends.base import Backend, BackendJob, BackendOutcome, Unsupported, places
from tcpdelay.experiments.plan import RunPlan

#: Most web on/off exchanges drawn ahead for one flow (each takes at least its on + off time).
MAX_EXCHANGES = 1_000_000


class Ns3Backend(Backend):
    """Runs a plan in ns-3 (see the module doc)."""

    name = "ns3"

    def check(self) -> None:
        if importlib.util.find_spec("ns") is None:
            raise TcpdelayError("backend ns3: ns-3's Python bindings are not installed "
                                "(pip install 'tcpdelay[sim]', which brings ns3==3.44)")

    def unsupported(self, plan: RunPlan) -> list[Unsupported]:
        return unsupported(plan)

    def notes(self, plan: RunPlan) -> list[str]:
        """What the plan asks for that ns-3 only approximates (one line each, for stderr and
        environment.json)."""
        from tcpdelay.sim.job import approximations

        seen: dict[str, list[str]] = {}
        from tcpdelay.sim.aqm import approximations as aqm_approximations

        for h in plan.hosts:
            for note in approximations(h.get("tcp") or {}):
                seen.setdefault(note, []).append(f"host {h['name']}")
        for key in ("a_to_b", "b_to_a"):
            for note in aqm_approximations(plan.link.get(key, {})):
                seen.setdefault(note, []).append(f"link {key}")
        return [f"{places(names)}: {note}" for note, names in seen.items()]

    def run(self, job: BackendJob) -> BackendOutcome:
        from tcpdelay.sim.worker import SimulationError, shared_worker

        plan, rd = job.plan, job.run_dir.resolve()     # the worker runs in a directory of its own
        started = time.time()
        sim_dir = rd / "sim"
        sim_dir.mkdir(parents=True, exist_ok=True)
        sim_job = _translate(plan, str(rd), write_packets=True, packets_dir=sim_dir)
        job_file = sim_dir / "job.json"
        job_file.write_text(json.dumps(sim_job.to_dict(), indent=1))
        worker = shared_worker()
        job.on_environment({"backend": "ns3", "ns3_version": _ns3_version(), "simulated": True,
                            "worker_import_s": worker.import_s, "job": str(job_file.relative_to(rd)),
                            "approximations": self.notes(plan)})
        if job.on_progress:
            job.on_progress(0.0, plan.duration_s)
        try:
            answer = worker.run(job_file)
        except SimulationError as err:
            return _failed(plan, started, str(err))
        if answer.get("exit") != 0:
            err_file = rd / "error.txt"
            why = err_file.read_text().splitlines()[0] if err_file.exists() else \
                f"exit status {answer.get('exit')} ({worker.last_error() or 'no message'})"
            return _failed(plan, started, f"the ns-3 simulation failed: {why}")
        for f in sim_dir.glob("flow-*.npz"):   # the packets are in the records now
            f.unlink()
        # the job as it ran, its paths relative to the run directory (which may be moved, or come
        # back from another node)
        job_file.write_text(json.dumps(_relative(sim_job.to_dict(), str(rd)), indent=1))
        result = json.loads((rd / "result.json").read_text())
        if job.on_progress:
            job.on_progress(plan.duration_s, plan.duration_s)
        results = result["results"]
        results["simulation"] = {"events": result.get("events"), "wall_s": result.get("wall_s"),
                                 "simulated_s": result.get("simulated_s")}
        return BackendOutcome(results=results, counters=result["counters"], t0_monotonic_s=plan.lead_s,
                              link_start_monotonic_s=0.0, started_unix_s=started, clock="ns3-simulation",
                              clock_source="ns-3 simulated time (s)")


def _relative(obj, root: str):
    if isinstance(obj, dict):
        return {k: _relative(v, root) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_relative(v, root) for v in obj]
    if isinstance(obj, str) and (obj == root or obj.startswith(root + "/")):
        return "." + obj[len(root):]
    return obj


def _failed(plan: RunPlan, started: float, why: str) -> BackendOutcome:
    return BackendOutcome(results={}, counters=None, t0_monotonic_s=plan.lead_s, link_start_monotonic_s=0.0,
                          started_unix_s=started, lost=[why], clock="ns3-simulation",
                          clock_source="ns-3 simulated time (s)")


def _ns3_version() -> str:
    try:
        from importlib.metadata import version

        return version("ns3")
    except Exception:  # noqa: BLE001
        return "unknown"


def unsupported(plan: RunPlan) -> list[Unsupported]:
    """Everything of ``plan`` that ns-3 or this backend cannot run, all at once: the hosts' TCP
    (:func:`tcpdelay.sim.job.unsupported`), congestion-control parameters the hosts set
    differently (ns-3 takes one value per run), packet captures, a queue discipline ns-3 cannot
    run as the emulator does (:func:`tcpdelay.sim.aqm.unsupported`), pulled streams, media flows'
    keep-alive and ``notsent_lowat``, cross-traffic kinds without a counterpart."""
    from tcpdelay.sim.job import DEFAULT_CONGESTION, NS3_CONGESTION, NS3_CONGESTION_HINT, NS3_CONGESTION_PARAMS
    from tcpdelay.sim.aqm import unsupported as aqm_unsupported
    from tcpdelay.sim.job import unsupported as tcp_unsupported

    out: list[Unsupported] = []
    if plan.host_kernel:
        out.append(Unsupported(f"host_kernel {plan.host_kernel['kernel']}: reference-kernel guests run only "
                               "on the testbed (ns-3 has its own TCP)", "hosts"))
    values: dict[str, dict[float, list[str]]] = {}
    for h in plan.hosts:
        tcp = h.get("tcp") or {}
        out += [Unsupported(what, f"host {h['name']}", NS3_CONGESTION_HINT if what.startswith("congestion") else "")
                for what in tcp_unsupported(tcp)]
        name = tcp.get("congestion_control") or DEFAULT_CONGESTION
        for k, v in (tcp.get("congestion_params") or {}).items():
            if name in NS3_CONGESTION and k in NS3_CONGESTION_PARAMS.get(name, {}):
                values.setdefault(f"{name} {k}", {}).setdefault(v, []).append(f"host {h['name']}")
    out += [Unsupported(f"congestion control {what}: the hosts ask for "
                        + " and ".join(f"{v:g} ({places(w)})" for v, w in by_value.items())
                        + ", ns-3 takes one value per run")
            for what, by_value in values.items() if len(by_value) > 1]
    links = [("link", plan.link, "")] + [(f"host {h['name']}", h["access"], "access link ")
                                         for h in plan.hosts if h.get("access")]
    for where, link, which in links:
        for key in ("a_to_b", "b_to_a"):
            if link.get(key, {}).get("pcap_file"):
                out.append(Unsupported(f"{which}{key}.pcap_file: no packet capture in the simulation", where))
            out += [Unsupported(f"{which}{key}.{what}", where)
                    for what in aqm_unsupported(link.get(key, {}), access=bool(which))]
    if plan.streams:
        out.append(Unsupported("pulled streams (http_video: nginx and a player) run on the testbed only"))
    for m in plan.media:
        if m.flow.transport.startswith("quic-"):
            out.append(Unsupported("QUIC transports are not available in ns-3 (its QUIC module is "
                                   "unmaintained); run them on the testbed", f"flow {m.name!r}"))
        if m.flow.heuristics.keepalive:
            out.append(Unsupported("heuristics.keepalive is not simulated yet", f"flow {m.name!r}"))
        if m.flow.tcp is not None and m.flow.tcp.notsent_lowat_bytes is not None:
            out.append(Unsupported("tcp.notsent_lowat_bytes has no ns-3 counterpart", f"flow {m.name!r}"))
    out += [Unsupported(f"kind {c.kind!r} has no ns-3 counterpart", f"cross {c.name!r}")
            for c in plan.cross if c.kind not in CROSS_KINDS]
    return out


#: The cross-traffic kinds the simulation runs (:func:`_cross_job`).
CROSS_KINDS = ("udp", "bulk", "page_load", "transfers", "web_onoff")


def _translate(plan: RunPlan, out_dir: str, *, write_packets: bool, packets_dir=None):
    """The simulation job of ``plan``; one :class:`ParameterError` listing everything ns-3
    cannot run of it (:func:`unsupported`)."""
    from tcpdelay.sim.job import Job, MediaJob, host_tcp

    Ns3Backend().check_plan(plan)
    hosts = [{"name": h["name"], "side": h["side"], "tcp": asdict(host_tcp(h.get("tcp") or {})),
              **({"access": h["access"]} if h.get("access") else {})} for h in plan.hosts]
    media = []
    for m in plan.media:
        f = m.flow
        h = f.heuristics
        tcp = f.tcp
        packets_file = ""
        if write_packets:
            packets_file = str(packets_dir / f"flow-{m.flow_id}.npz")
            _write_packets(packets_file, m)
        media.append(MediaJob(
            flow_id=m.flow_id, sender=m.sender, receiver=m.receiver, transport=f.transport, port=m.port,
            start_s=m.start_s, stop_s=m.stop_s, packets_file=packets_file,
            nodelay=True if tcp is None or tcp.nodelay is None else bool(tcp.nodelay),
            sndbuf_bytes=None if tcp is None else tcp.sndbuf_bytes,
            rcvbuf_bytes=None if tcp is None else tcp.rcvbuf_bytes,
            split=int(h.split), connections=int(h.connections), scheduler=h.scheduler,
            proactive_drop_s=h.proactive_drop_s))
    cross = [_cross_job(c) for c in plan.cross]
    return Job(seed=plan.seed, duration_s=plan.duration_s, t0_s=plan.lead_s, link=plan.link, hosts=hosts,
               out_dir=out_dir, media=media, cross=cross, tcp_state_period_s=plan.tcp_state_period_s,
               queue_period_s=plan.tcp_state_period_s or 0.01, mtu_bytes=int(plan.mtu_bytes))


def _cross_job(c):
    """A cross-traffic flow as the testbed's generators make it (:mod:`tcpdelay.traffic`): the
    same sizes, the same on/off draws from the flow's seed; request/response over TCP."""
    from tcpdelay.sim.job import CrossJob
    from tcpdelay.traffic.page_load import split_bytes

    x = c.cross
    base = dict(flow_id=c.flow_id, kind=c.kind, transport=c.transport, server=c.server, client=c.client,
                port=c.port + (c.flow_id if c.transport == "tcp" else 0),   # a server (and port) per flow
                start_s=c.start_s, stop_s=c.stop_s)
    if c.kind == "udp":
        return CrossJob(**base, rate_bps=float(x.rate_bps), packet_size_bytes=int(x.packet_size_bytes))
    if c.kind == "bulk":
        responses = [[0, int(x.size_bytes)]] if x.size_bytes else [[3, 0]]
        return CrossJob(**base, responses=responses, starts_s=[c.start_s])
    if c.kind == "page_load":
        sizes = split_bytes(int(x.total_bytes), int(x.connections))
        return CrossJob(**base, responses=[[0, n] for n in sizes], starts_s=[c.start_s] * len(sizes))
    if c.kind == "transfers":    # one after another, each gap_s after the previous closed
        # tcp.mss_bytes: both ends' SegmentSize (ns-3 has no MSS option: each end sends its own);
        # tcp.window_clamp_bytes: the client's receive buffer, the most ns-3 advertises
        return CrossJob(**base, responses=[[4, int(x.size_bytes)]] * int(x.transfers), schedule=1,
                        offs_s=[float(x.gap_s)] * (int(x.transfers) - 1), timeout_s=float(x.timeout_s),
                        segment_bytes=x.tcp.mss_bytes, rcvbuf_bytes=x.tcp.window_clamp_bytes)
    if c.kind == "web_onoff" and x.mode == "poisson":
        return CrossJob(**base, responses=[[2, 0]], starts_s=[c.start_s], segment_bytes=int(x.packet_size_bytes),
                        gap_mean_s=float(x.gap_mean_s))
    if c.kind == "web_onoff":
        rng = np.random.default_rng(c.seed)          # traffic/web_onoff.py's draws, in its order
        ons, offs, used = [], [], 0.0
        while used < c.stop_s - c.start_s and len(ons) < MAX_EXCHANGES:
            ons.append(float(rng.exponential(x.on_mean_s)))
            offs.append(float(rng.exponential(x.off_mean_s)))
            used += ons[-1] + offs[-1]
        return CrossJob(**base, responses=[[1, max(on, 1e-6)] for on in ons], schedule=1, offs_s=offs,
                        segment_bytes=int(x.packet_size_bytes))
    raise ParameterError(f"backend ns3: cross[{c.name}]: kind {c.kind!r} has no ns-3 counterpart")


def _write_packets(path: str, m) -> None:
    """The media flow's packets, as the testbed's sender would produce them (same source, seed
    and length)."""
    pk = list(m.source.packets(m.stop_s - m.start_s, m.seed))
    np.savez(path, at_s=np.array([p.at_s for p in pk], dtype=float),
             size_bytes=np.array([p.size_bytes for p in pk], dtype=np.int64),
             frame_id=np.array([p.frame_id for p in pk], dtype=np.int64),
             frame_type=np.array([p.frame_type for p in pk], dtype="U1"),
             frame_last=np.array([p.frame_last for p in pk], dtype=bool))
