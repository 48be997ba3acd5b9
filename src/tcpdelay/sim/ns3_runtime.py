"""One simulation job in ns-3 (:mod:`tcpdelay.sim.job`): build, run, write its records.

Imported only inside a simulation worker (:mod:`tcpdelay.sim.worker`): importing ns-3's
bindings takes seconds, globs the current directory and prints warnings, and a fatal error in
ns-3 aborts the process.

The network (docs/ns3.md): every host has its own point-to-point access link to its side's
router (10 Gb/s, no delay, a queue that never fills: the testbed's hosts reach the emulator
through veth pairs); the two routers are joined by an :class:`EmulatedChannel` whose directions
are the plan's link tables, the emulator's model re-implemented in C++
(``cpp/tcpdelay_sim.h``). No queue discipline is installed (ns-3 would add FqCoDel): the only
queue that fills is the emulated link's.

Outputs in ``job.out_dir``: the record datasets ``sent/``, ``received/``, ``tcp_state/`` and
``link_queue/`` (:mod:`tcpdelay.records`), and ``result.json``: every part's answer by part key
(as the testbed's processes answer: ``tx:<id>``, ``rx:<id>``, ``cross:<id>``), the link's
counters in the emulator's format, the events simulated and the wall time.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import numpy as np

from tcpdelay.records import write_part
from tcpdelay.sim.job import LINUX_DELACK_TIMEOUT_S, LINUX_MIN_RTO_S, LINUX_SEGMENT_BYTES, Job

#: The access links' rate and queue (never the bottleneck).
ACCESS_RATE = "10Gbps"
ACCESS_QUEUE = "1000000p"
#: The routers' devices on the emulated link send this fast (the channel decides the timing).
TRUNK_RATE = "1000Gbps"
#: RFC 4571 framing before each media packet on TCP.
FRAMING_BYTES = 2
#: Seconds a media sender's queue may take to drain after the run (as the testbed's DRAIN_S).
DRAIN_S = 5.0

_HEADER = Path(__file__).with_name("cpp") / "tcpdelay_sim.h"
_loaded = None


def load():
    """Import ns-3 and compile tcpdelay's C++ parts (once per process); returns ``(ns, t)``
    with ``t`` the ``tcpdelay_sim`` C++ namespace."""
    global _loaded
    if _loaded is None:
        from ns import ns  # noqa: PLC0415 - seconds to import; only here
        import cppyy

        cppyy.cppdef(_HEADER.read_text())
        _loaded = (ns, cppyy.gbl.tcpdelay_sim)
    return _loaded


def simulate(job: Job) -> dict:
    """Run ``job``; write its records and ``result.json`` into ``job.out_dir``; return the result."""
    ns, t = load()
    wall0 = time.monotonic()
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ns.Simulator.Destroy()
    ns.RngSeedManager.SetSeed(1)
    ns.RngSeedManager.SetRun(int(job.seed) % (2**63))
    _linux_defaults(ns)
    _congestion_attrs(ns, job)

    routers = ns.NodeContainer()
    routers.Create(2)
    nodes: dict[str, object] = {}
    hosts = ns.NodeContainer()
    for h in job.hosts:
        n = ns.CreateObject[ns.Node]()
        nodes[h["name"]] = n
        hosts.Add(n)
    stack = ns.InternetStackHelper()
    stack.Install(routers)
    stack.Install(hosts)

    access = ns.PointToPointHelper()
    access.SetDeviceAttribute("DataRate", ns.StringValue(ACCESS_RATE))
    access.SetChannelAttribute("Delay", ns.StringValue("0s"))
    access.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue(ACCESS_QUEUE))
    address = ns.Ipv4AddressHelper()
    ip_of: dict[str, object] = {}
    for i, h in enumerate(job.hosts):
        router = routers.Get(0 if h["side"] == "left" else 1)
        devs = access.Install(nodes[h["name"]], router)
        address.SetBase(ns.Ipv4Address(f"10.{1 if h['side'] == 'left' else 2}.{i}.0"), ns.Ipv4Mask("255.255.255.0"))
        ifs = address.Assign(devs)
        t.RemoveQdiscs(devs)
        ip_of[h["name"]] = ifs.GetAddress(0)
    trunk = t.ConnectEmulated(routers.Get(0), routers.Get(1), TRUNK_RATE)
    address.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.252"))
    address.Assign(trunk.devices)
    t.RemoveQdiscs(trunk.devices)
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
    channel = t.Raw(trunk.channel)      # cppyy: members through the object, never the Ptr
    _configure_link(ns, t, channel, job)

    for h in job.hosts:                     # each host's congestion control
        tcp = h["tcp"]
        l4 = t.TcpL4(nodes[h["name"]])
        l4.SetAttribute("SocketType", ns.TypeIdValue(ns.TypeId.LookupByName(tcp["congestion_type"])))
    stack.AssignStreams(hosts, 1000)
    stack.AssignStreams(routers, 2000)

    host_tcp = {h["name"]: h["tcp"] for h in job.hosts}
    keep: list = []                          # the apps and probes live until the results are read
    media = [_media(ns, t, job, m, nodes, ip_of, host_tcp, keep) for m in job.media]
    bulk = [_bulk(ns, t, job, b, nodes, ip_of, host_tcp, keep) for b in job.bulk]
    channel.StartSampling(job.queue_period_s)

    end_s = job.t0_s + job.duration_s + DRAIN_S
    ns.Simulator.Stop(ns.Seconds(end_s))
    ns.Simulator.Run()
    events = int(ns.Simulator.GetEventCount()) if hasattr(ns.Simulator, "GetEventCount") else None

    results: dict[str, object] = {}
    for m, parts in zip(job.media, media):
        results.update(_media_results(job, m, parts, out))
    for b, parts in zip(job.bulk, bulk):
        results.update(_bulk_results(job, b, parts, out))
    _write_queue(channel, out)
    result = {"results": results, "counters": _counters(channel, job), "events": events,
              "simulated_s": end_s, "wall_s": time.monotonic() - wall0}
    ns.Simulator.Destroy()
    (out / "result.json").write_text(json.dumps(result, default=_jsonable))
    return result


def _jsonable(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return None if math.isnan(x) else float(x)
    raise TypeError(type(x))


# --------------------------------------------------------------------------- settings


def _linux_defaults(ns) -> None:
    sd = ns.Config.SetDefault
    sd("ns3::TcpSocket::SegmentSize", ns.UintegerValue(LINUX_SEGMENT_BYTES))
    sd("ns3::TcpSocket::DelAckCount", ns.UintegerValue(2))
    sd("ns3::TcpSocket::DelAckTimeout", ns.TimeValue(ns.Seconds(LINUX_DELACK_TIMEOUT_S)))
    sd("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.Seconds(LINUX_MIN_RTO_S)))
    sd("ns3::TcpSocketBase::ClockGranularity", ns.TimeValue(ns.MilliSeconds(1)))
    sd("ns3::TcpSocketBase::Timestamp", ns.BooleanValue(True))
    sd("ns3::TcpSocketBase::WindowScaling", ns.BooleanValue(True))


def _congestion_attrs(ns, job: Job) -> None:
    """A variant's parameters are ns-3 defaults (one value per run: hosts must agree)."""
    seen: dict[str, float] = {}
    for h in job.hosts:
        ctype = h["tcp"]["congestion_type"]
        for attr, value in h["tcp"].get("congestion_attrs", {}).items():
            key = f"{ctype}::{attr}"
            if seen.setdefault(key, value) != value:
                raise ValueError(f"{key}: hosts ask for {seen[key]} and {value}; ns-3 takes one per run")
            ns.Config.SetDefault(key, ns.UintegerValue(int(value)))


def _configure_link(ns, t, channel, job: Job) -> None:
    for index, key in ((0, "a_to_b"), (1, "b_to_a")):
        d = channel.dir[index]
        spec = job.link.get(key, {})
        d.delay_ns = round(float(spec.get("delay_s", 0.0)) * 1e9)
        d.jitter_ns = round(float(spec.get("jitter_s", 0.0)) * 1e9)
        d.reorder = bool(spec.get("reorder", False))
        loss = spec.get("loss") or {"model": "none"}
        d.loss_model = {"none": 0, "bernoulli": 1, "gilbert_elliott": 2}[loss["model"]]
        d.p, d.r = float(loss.get("p", 0.0)), float(loss.get("r", 0.0))
        d.k, d.h = float(loss.get("k", 1.0)), float(loss.get("h", 0.0))
        d.rate_bps = int(round(spec["rate_bps"])) if spec.get("rate_bps") else 0
        if spec.get("trace_file"):
            for v in np.loadtxt(spec["trace_file"], dtype=np.int64, ndmin=1):
                d.trace_ms.push_back(int(v))
        if spec.get("queue_packets") is not None:
            d.queue_kind, d.queue_limit = 1, int(spec["queue_packets"])
        elif spec.get("queue_bytes") is not None:
            d.queue_kind, d.queue_limit = 2, int(spec["queue_bytes"])
        for o in sorted(spec.get("outages", []), key=lambda o: o["at_s"]):
            d.outage_start_ns.push_back(round(o["at_s"] * 1e9))
            d.outage_end_ns.push_back(round((o["at_s"] + o["duration_s"]) * 1e9))
        d.loss_rng = t.NewUniform(3 * index + 1)
        d.jitter_rng = t.NewUniform(3 * index + 2)


def _tcp_socket(ns, t, node, tcp: dict, *, sndbuf: int | None = None, rcvbuf: int | None = None,
                nodelay: bool = True):
    s = ns.Socket.CreateSocket(node, ns.TcpSocketFactory.GetTypeId())
    s.SetAttribute("SndBufSize", ns.UintegerValue(int(sndbuf or tcp["sndbuf_bytes"])))
    s.SetAttribute("RcvBufSize", ns.UintegerValue(int(rcvbuf or tcp["rcvbuf_bytes"])))
    s.SetAttribute("InitialCwnd", ns.UintegerValue(int(tcp["initcwnd_segments"])))
    s.SetAttribute("TcpNoDelay", ns.BooleanValue(bool(nodelay)))
    s.SetAttribute("Sack", ns.BooleanValue(bool(tcp["sack"])))
    return s


# --------------------------------------------------------------------------- flows


def _media(ns, t, job, m, nodes, ip_of, host_tcp, keep):
    pk = np.load(m.packets_file)
    at, size = pk["at_s"].astype(float), pk["size_bytes"].astype(np.int64)
    udp = m.transport == "udp"
    rx_node, tx_node = nodes[m.receiver], nodes[m.sender]
    if udp:
        listener = ns.Socket.CreateSocket(rx_node, ns.UdpSocketFactory.GetTypeId())
    else:
        listener = _tcp_socket(ns, t, rx_node, host_tcp[m.receiver], rcvbuf=m.rcvbuf_bytes)
    listener.Bind(ns.InetSocketAddress(ns.Ipv4Address.GetAny(), m.port).ConvertTo())
    rx_app = t.New[t.MediaReceiver]()
    rx = t.Raw(rx_app)
    rx.udp = udp
    rx.n_packets = len(size)
    if not udp:
        for e in np.cumsum(size + FRAMING_BYTES):
            rx.end_byte.push_back(int(e))
    rx.Setup(listener)
    rx_node.AddApplication(rx_app)
    rx.SetStartTime(ns.Seconds(0.0))

    if udp:
        sock = ns.Socket.CreateSocket(tx_node, ns.UdpSocketFactory.GetTypeId())
    else:
        sock = _tcp_socket(ns, t, tx_node, host_tcp[m.sender], sndbuf=m.sndbuf_bytes, nodelay=m.nodelay)
    tx_app = t.New[t.MediaSender]()
    tx = t.Raw(tx_app)
    tx.udp = udp
    tx.framing_bytes = FRAMING_BYTES
    for a, s in zip(at, size):
        tx.times_s.push_back(float(a))
        tx.sizes.push_back(int(s))
    tx.Setup(sock, ns.InetSocketAddress(ip_of[m.receiver], m.port).ConvertTo())
    tx_node.AddApplication(tx_app)
    tx.first_s = job.t0_s + m.start_s
    tx.SetStartTime(ns.Seconds(0.0))            # connects first, as the testbed's sender does
    tx.SetStopTime(ns.Seconds(job.t0_s + m.stop_s + DRAIN_S))
    probe = None
    if not udp and job.tcp_state_period_s > 0:
        probe_obj = t.New[t.TcpStateProbe]()
        probe = t.Raw(probe_obj)
        probe.flow_id, probe.connection, probe.mss = m.flow_id, 0, LINUX_SEGMENT_BYTES
        t.AttachProbeAt(probe_obj, sock, job.tcp_state_period_s, job.t0_s + m.start_s)
        keep.append(probe_obj)
    parts = {"tx": tx, "rx": rx, "probe": probe, "packets": pk, "sock": sock, "listener": listener,
             "apps": (tx_app, rx_app)}
    keep.append(parts)
    return parts


def _bulk(ns, t, job, b, nodes, ip_of, host_tcp, keep):
    listener = _tcp_socket(ns, t, nodes[b.client], host_tcp[b.client])
    listener.Bind(ns.InetSocketAddress(ns.Ipv4Address.GetAny(), b.port).ConvertTo())
    sink_app = t.New[t.ByteSink]()
    sink = t.Raw(sink_app)
    sink.Setup(listener)
    nodes[b.client].AddApplication(sink_app)
    sink.SetStartTime(ns.Seconds(0.0))
    sock = _tcp_socket(ns, t, nodes[b.server], host_tcp[b.server])
    bulk_app = t.New[t.BulkSender]()
    app = t.Raw(bulk_app)
    app.size_bytes = int(b.size_bytes)
    app.max_buffer = int(host_tcp[b.server]["sndbuf_bytes"])
    app.Setup(sock, ns.InetSocketAddress(ip_of[b.client], b.port).ConvertTo())
    nodes[b.server].AddApplication(bulk_app)
    app.SetStartTime(ns.Seconds(job.t0_s + b.start_s))
    app.SetStopTime(ns.Seconds(job.t0_s + b.stop_s))
    probe = None
    if job.tcp_state_period_s > 0:
        probe_obj = t.New[t.TcpStateProbe]()
        probe = t.Raw(probe_obj)
        probe.flow_id, probe.connection, probe.mss = b.flow_id, 0, LINUX_SEGMENT_BYTES
        t.AttachProbeAt(probe_obj, sock, job.tcp_state_period_s, job.t0_s + b.start_s)
        keep.append(probe_obj)
    parts = {"app": app, "sink": sink, "probe": probe, "sock": sock, "listener": listener,
             "apps": (bulk_app, sink_app)}
    keep.append(parts)
    return parts


# --------------------------------------------------------------------------- results


def _vec(v, dtype) -> np.ndarray:
    return np.array(list(v), dtype=dtype)


def _write_probe(probe, out: Path, tag: str) -> dict:
    if probe is None or len(probe.t_s) == 0:
        return {"rows": 0}
    n = len(probe.t_s)
    ssth = _vec(probe.ssthresh_seg, np.int64)
    pacing = _vec(probe.pacing, float)
    cols = {
        "flow_id": np.full(n, probe.flow_id, np.int32), "connection": np.full(n, probe.connection, np.int16),
        "time_s": _vec(probe.t_s, float), "cwnd_segments": _vec(probe.cwnd_seg, np.int64),
        "ssthresh_segments": [None if x < 0 else int(x) for x in ssth],
        "srtt_s": [None if math.isnan(x) else x for x in _vec(probe.srtt, float)], "rttvar_s": [None] * n,
        "delivery_rate_bps": [None] * n, "retransmits_total": _vec(probe.retx, np.int64),
        "ca_state": _vec(probe.ca, np.int8), "bytes_acked": _vec(probe.acked, np.int64),
        "mss_bytes": np.full(n, probe.mss, np.int32),
        "pacing_rate_bps": [None if (math.isnan(x) or x == 0) else x for x in pacing],
        "cc_state_0": [None] * n, "cc_state_1": [None] * n, "cc_state_2": [None] * n, "cc_state_3": [None] * n,
    }
    write_part(out, "tcp_state", cols, writer_id=tag)
    return {"rows": n}


def _tcp_info_end(probe) -> list[dict]:
    if probe is None:
        return []
    return [{"total_retrans": int(probe.retransmits), "bytes_retrans": int(probe.retransmitted_bytes),
             "total_rto": int(probe.rto_events), "snd_cwnd": int(probe.cwnd // probe.mss),
             "ca_state": int(probe.ca_state), "bytes_acked": int(probe.acked_bytes),
             "rtt_us": None if math.isnan(probe.srtt_s) else round(probe.srtt_s * 1e6),
             "min_rtt_us": None if math.isinf(probe.min_rtt_s) else round(probe.min_rtt_s * 1e6), "lost": None}]


def _media_results(job: Job, m, parts: dict, out: Path) -> dict:
    tx, rx, pk = parts["tx"], parts["rx"], parts["packets"]
    n_sent = int(tx.packets_sent)
    at = pk["at_s"][:n_sent].astype(float)
    size = pk["size_bytes"][:n_sent].astype(np.int64)
    send = job.t0_s + m.start_s + at
    seq = np.arange(n_sent, dtype=np.int64)
    frame_id = pk["frame_id"][:n_sent] if "frame_id" in pk else np.full(n_sent, -1)
    frame_type = pk["frame_type"][:n_sent] if "frame_type" in pk else np.full(n_sent, "")
    frame_last = pk["frame_last"][:n_sent] if "frame_last" in pk else np.ones(n_sent, bool)
    tag = f"ns3-{m.flow_id}"
    write_part(out, "sent", {"flow_id": np.full(n_sent, m.flow_id, np.int32), "connection": np.zeros(n_sent, np.int16),
                             "seq": seq, "size_bytes": size.astype(np.int32), "send_time_s": send,
                             "frame_id": frame_id.astype(np.int64), "frame_type": [str(x) for x in frame_type],
                             "frame_last": frame_last.astype(bool), "dropped": np.zeros(n_sent, bool)}, writer_id=tag)
    recv = _vec(rx.recv_time_s, float)[:n_sent]
    got = ~np.isnan(recv)
    write_part(out, "received", {"flow_id": np.full(int(got.sum()), m.flow_id, np.int32),
                                 "connection": np.zeros(int(got.sum()), np.int16), "seq": seq[got],
                                 "size_bytes": size[got].astype(np.int32), "send_time_s": send[got],
                                 "recv_time_s": recv[got]}, writer_id=tag)
    received_bytes = int(size[got].sum())
    last = float(send[-1]) if n_sent else job.t0_s + m.start_s
    drained = m.transport == "udp" or int(tx.pending) == 0
    sender = {"status": "completed" if drained and not tx.failed else ("drain-timeout" if not tx.failed else "connection-lost"),
              "clock": "ns3-simulation", "transport": m.transport, "connections": 1, "split": 1, "scheduler": "blind",
              "packets": n_sent, "dropped_packets": 0, "queue_full_packets": 0,
              "queued_bytes_at_end": int(tx.queued_at_end), "elapsed_s": last - (job.t0_s + m.start_s),
              "duration_s": m.stop_s - m.start_s, "per_connection_packets": [n_sent],
              "wire_bytes": int(size.sum()) + (FRAMING_BYTES * n_sent if m.transport == "tcp" else 0),
              "tcp_info_end": _tcp_info_end(parts["probe"]), "tcp_state": _write_probe(parts["probe"], out, tag)}
    receiver = {"status": "completed", "clock": "ns3-simulation", "received_packets": int(got.sum()),
                "received_bytes": received_bytes, "bytes_in": int(rx.received_bytes), "duplicate_packets":
                max(0, len(rx.order) - int(got.sum())) if m.transport == "udp" else 0,
                "incomplete_packets": 0, "keepalive_packets": 0, "media_connections": 1,
                "first_recv_time_s": float(np.nanmin(recv)) if got.any() else None,
                "last_recv_time_s": float(np.nanmax(recv)) if got.any() else None}
    return {f"tx:{m.flow_id}": sender, f"rx:{m.flow_id}": [receiver]}


def _bulk_results(job: Job, b, parts: dict, out: Path) -> dict:
    app, sink = parts["app"], parts["sink"]
    span = (sink.last_s - sink.first_s) if sink.first_s >= 0 else 0.0
    res = {"bytes": int(sink.bytes), "sent_bytes": int(app.written), "complete": bool(app.done) or b.size_bytes == 0,
           "connect_s": None if app.connected_s < 0 else app.connected_s - job.t0_s,
           "goodput_bps": sink.bytes * 8 / (b.stop_s - b.start_s) if b.stop_s > b.start_s else 0.0,
           "span_s": span, "error": "connection failed" if app.failed else None,
           "tcp_info_end": _tcp_info_end(parts["probe"]),
           "tcp_state": _write_probe(parts["probe"], out, f"ns3-{b.flow_id}")}
    return {f"cross:{b.flow_id}": res}


def _write_queue(channel, out: Path) -> None:
    for index, key in ((0, "a_to_b"), (1, "b_to_a")):
        d = channel.dir[index]
        n = len(d.qs_time_s)
        if n:
            write_part(out, "link_queue", {"direction": [key] * n, "time_s": _vec(d.qs_time_s, float),
                                           "packets": _vec(d.qs_packets, np.int64), "bytes": _vec(d.qs_bytes, np.int64)},
                       writer_id=f"ns3-{key}")


def _counters(channel, job: Job) -> dict:
    out = {"seed": job.seed, "realtime": False}
    for index, key in ((0, "a_to_b"), (1, "b_to_a")):
        d = channel.dir[index]
        drops = {"loss": int(d.drop_loss), "queue": int(d.drop_queue), "outage": int(d.drop_outage),
                 "memory": 0, "oversize": 0, "write_error": 0}
        drops["total"] = sum(drops.values())
        out[key] = {"packets_in": int(d.packets_in), "bytes_in": int(d.bytes_in), "packets_out": int(d.delivered),
                    "bytes_out": int(d.delivered_bytes), "drops": drops, "peak_queue_packets": int(d.peak_packets),
                    "peak_queue_bytes": int(d.peak_bytes), "in_flight_packets": 0}
    return out


def run_job_file(path: str | os.PathLike) -> dict:
    """Run the job in a JSON file (the worker's child does this)."""
    return simulate(Job.from_dict(json.loads(Path(path).read_text())))
