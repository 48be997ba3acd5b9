"""One simulation job in ns-3 (:mod:`tcpdelay.sim.job`): build, run, write its records.

Imported only inside a simulation worker (:mod:`tcpdelay.sim.worker`): importing ns-3's
bindings takes seconds, globs the current directory and prints warnings, and a fatal error in
ns-3 aborts the process.

The network (docs/ns3.md): every host has its own point-to-point access link to its side's
router (10 Gb/s, no delay, a queue that never fills: the testbed's hosts reach the emulator
through veth pairs) or, when the plan gives the host an ``access`` link (papers/004's topology),
an :class:`EmulatedChannel` of its own with those settings (``a_to_b`` host -> router); the two
routers are joined by an :class:`EmulatedChannel` whose directions are the plan's link tables,
the emulator's model re-implemented in C++ (``cpp/tcpdelay_sim.h``). No queue discipline is
installed (ns-3 would add FqCoDel): the only queues that fill are the emulated links' — except
where a direction of the bottleneck has an ``aqm`` discipline: then ns-3's queue disc for it
sits at the router's sending device, which serializes at the direction's rate
(:mod:`tcpdelay.sim.aqm`).

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
import pyarrow as pa

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
        import cppyy

        from tcpdelay.sim.ns3_import import import_ns3

        ns = import_ns3()   # seconds: the modules a simulation uses (ns3_import.MODULES), not all
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
    access.SetDeviceAttribute("Mtu", ns.UintegerValue(int(job.mtu_bytes)))
    access.SetChannelAttribute("Delay", ns.StringValue("0s"))
    access.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue(ACCESS_QUEUE))
    address = ns.Ipv4AddressHelper()
    ip_of: dict[str, object] = {}
    access_links: dict[str, object] = {}     # host -> its emulated access channel
    for i, h in enumerate(job.hosts):
        router = routers.Get(0 if h["side"] == "left" else 1)
        if h.get("access"):
            own = t.ConnectEmulated(nodes[h["name"]], router, TRUNK_RATE, int(job.mtu_bytes))
            devs = own.devices
            access_links[h["name"]] = t.Raw(own.channel)
            # random streams of their own: the bottleneck's are 1..5, host i's from 10 + 6 i
            _configure_channel(t, access_links[h["name"]], h["access"], 10 + 6 * i)
        else:
            devs = access.Install(nodes[h["name"]], router)
        address.SetBase(ns.Ipv4Address(f"10.{1 if h['side'] == 'left' else 2}.{i}.0"), ns.Ipv4Mask("255.255.255.0"))
        ifs = address.Assign(devs)
        t.RemoveQdiscs(devs)
        ip_of[h["name"]] = ifs.GetAddress(0)
    trunk = t.ConnectEmulated(routers.Get(0), routers.Get(1), TRUNK_RATE, int(job.mtu_bytes))
    address.SetBase(ns.Ipv4Address("10.0.0.0"), ns.Ipv4Mask("255.255.255.252"))
    address.Assign(trunk.devices)
    t.RemoveQdiscs(trunk.devices)
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
    channel = t.Raw(trunk.channel)      # cppyy: members through the object, never the Ptr
    _configure_link(ns, t, channel, job, trunk.devices)

    for h in job.hosts:                     # each host's congestion control
        tcp = h["tcp"]
        l4 = t.TcpL4(nodes[h["name"]])
        l4.SetAttribute("SocketType", ns.TypeIdValue(ns.TypeId.LookupByName(tcp["congestion_type"])))
    stack.AssignStreams(hosts, 1000)
    stack.AssignStreams(routers, 2000)

    host_tcp = {h["name"]: h["tcp"] for h in job.hosts}
    keep: list = []                          # the apps and probes live until the results are read
    media = [_media(ns, t, job, m, nodes, ip_of, host_tcp, keep) for m in job.media]
    cross = [_cross(ns, t, job, c, nodes, ip_of, host_tcp, keep) for c in job.cross]
    channel.StartSampling(job.queue_period_s)

    end_s = job.t0_s + job.duration_s + DRAIN_S
    ns.Simulator.Stop(ns.Seconds(end_s))
    ns.Simulator.Run()
    events = int(ns.Simulator.GetEventCount()) if hasattr(ns.Simulator, "GetEventCount") else None

    results: dict[str, object] = {}
    for m, parts in zip(job.media, media):
        results.update(_media_results(job, m, parts, out))
    for c, parts in zip(job.cross, cross):
        results.update(_cross_results(job, c, parts, out))
    _write_queue(channel, out)
    import resource

    counters = _counters(channel, job, job.link)
    if access_links:
        counters["access"] = {name: _counters(ch, job) for name, ch in access_links.items()}
    result = {"results": results, "counters": counters, "events": events,
              "simulated_s": end_s, "wall_s": time.monotonic() - wall0,
              "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
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
    # Linux's RTO is srtt + max(4 rttvar, RTO_min) (tcp_set_rto: rttvar never below rto_min);
    # ns-3's is max(MinRto, srtt + max(ClockGranularity, 4 rttvar)). With ns-3's 1-ms granularity
    # a steady long RTT gives RTO ~ srtt and spurious timeouts; a granularity of RTO_min gives
    # Linux's formula.
    sd("ns3::TcpSocketBase::ClockGranularity", ns.TimeValue(ns.Seconds(LINUX_MIN_RTO_S)))
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


def _configure_link(ns, t, channel, job: Job, devices) -> None:
    """The bottleneck: its channel's two directions, and a direction's queue discipline (if it
    has one) on the device that sends into it (device 0 sends ``a_to_b``)."""
    from tcpdelay.sim.aqm import queue_disc

    _configure_channel(t, channel, job.link, 0)
    for index, key in ((0, "a_to_b"), (1, "b_to_a")):
        qd = queue_disc(job.link.get(key, {}), int(job.mtu_bytes))
        if qd is None:
            continue
        setup = t.QdiscSetup()
        setup.type = qd["type"]
        for name, value in qd["attributes"].items():
            setup.names.push_back(name)
            setup.values.push_back(value)
        setup.quantum = qd["quantum_bytes"]
        setup.device_rate_bps = round(qd["device_rate_bps"] or 0)
        t.InstallQdisc(devices.Get(index), channel.dir[index], setup)


def _configure_channel(t, channel, link: dict, stream_base: int) -> None:
    """An :class:`EmulatedChannel`'s two directions from link tables (``a_to_b``: device 0 ->
    device 1); its random streams are ``stream_base`` + 1, 2 (a_to_b) and + 4, 5 (b_to_a). A
    direction with a queue discipline (:mod:`tcpdelay.sim.aqm`) gets neither rate nor queue
    here: the device and its queue disc are them."""
    from tcpdelay.sim.aqm import discipline

    for index, key in ((0, "a_to_b"), (1, "b_to_a")):
        d = channel.dir[index]
        spec = link.get(key, {})
        if discipline(spec) != "drop_tail":
            spec = {k: v for k, v in spec.items() if k not in ("rate_bps", "queue_packets", "queue_bytes")}
        d.delay_ns = round(float(spec.get("delay_s", 0.0)) * 1e9)
        d.jitter_ns = round(float(spec.get("jitter_s", 0.0)) * 1e9)
        d.reorder = bool(spec.get("reorder", False))
        loss = spec.get("loss") or {"model": "none"}
        d.loss_model = {"none": 0, "bernoulli": 1, "gilbert_elliott": 2}[loss["model"]]
        d.p, d.r = float(loss.get("p", 0.0)), float(loss.get("r", 0.0))
        d.k, d.h = float(loss.get("k", 1.0)), float(loss.get("h", 0.0))
        d.rate_bps = int(round(spec["rate_bps"])) if spec.get("rate_bps") else 0
        if spec.get("trace_file"):
            _fill(t, d.trace_ms, np.loadtxt(spec["trace_file"], dtype=np.int64, ndmin=1), np.uint64)
        if spec.get("queue_packets") is not None:
            d.queue_kind, d.queue_limit = 1, int(spec["queue_packets"])
        elif spec.get("queue_bytes") is not None:
            d.queue_kind, d.queue_limit = 2, int(spec["queue_bytes"])
        for o in sorted(spec.get("outages", []), key=lambda o: o["at_s"]):
            d.outage_start_ns.push_back(round(o["at_s"] * 1e9))
            d.outage_end_ns.push_back(round((o["at_s"] + o["duration_s"]) * 1e9))
        d.loss_rng = t.NewUniform(stream_base + 3 * index + 1)
        d.jitter_rng = t.NewUniform(stream_base + 3 * index + 2)


def _socket_maker(t, node, tcp: dict, *, sndbuf: int | None = None, rcvbuf: int | None = None,
                  nodelay: bool = True, segment: int | None = None):
    """A ``SocketMaker`` (cpp/tcpdelay_sim.h) for ``node`` with the host's TCP settings, these
    overrides on top: the one place a simulated socket's settings are applied."""
    m = t.SocketMaker()
    m.node = node
    m.sndbuf, m.rcvbuf = int(sndbuf or tcp["sndbuf_bytes"]), int(rcvbuf or tcp["rcvbuf_bytes"])
    m.initcwnd, m.sack, m.nodelay = int(tcp["initcwnd_segments"]), bool(tcp["sack"]), bool(nodelay)
    if tcp.get("ecn") is not None:
        m.ecn = int(tcp["ecn"])
    m.segment = int(segment or 0)
    return m


def _tcp_socket(t, node, tcp: dict, **over):
    return _socket_maker(t, node, tcp, **over).Make()


# --------------------------------------------------------------------------- flows


#: A media flow's connection c is bound to MEDIA_CONN_PORT + MEDIA_CONN_STRIDE * flow_id + c on its
#: sender (how the receiver tells its connections apart, as the testbed's by their tokens).
MEDIA_CONN_PORT = 10_000
MEDIA_CONN_STRIDE = 32
#: RTP + tcpdelay header: the smallest piece of split-N (transport/framing.py).
MIN_PIECE_BYTES = 32


def _pieces(size: np.ndarray, split: int) -> np.ndarray:
    """RTP packets per media packet with split-N, as the testbed's sender splits
    (``max(1, min(split, size // 32))``)."""
    return np.maximum(1, np.minimum(split, size // MIN_PIECE_BYTES)).astype(np.int64)


def _media(ns, t, job, m, nodes, ip_of, host_tcp, keep):
    pk = np.load(m.packets_file)
    at, size = pk["at_s"].astype(float), pk["size_bytes"].astype(np.int64)
    pieces = _pieces(size, m.split)
    udp = m.transport == "udp"
    rx_node, tx_node = nodes[m.receiver], nodes[m.sender]
    base_port = MEDIA_CONN_PORT + MEDIA_CONN_STRIDE * m.flow_id
    ledger = t.New[t.Ledger]()
    if udp:
        listener = ns.Socket.CreateSocket(rx_node, ns.UdpSocketFactory.GetTypeId())
    else:
        listener = _tcp_socket(t, rx_node, host_tcp[m.receiver], rcvbuf=m.rcvbuf_bytes)
    listener.Bind(ns.InetSocketAddress(ns.Ipv4Address.GetAny(), m.port).ConvertTo())
    rx_app = t.New[t.MediaReceiver]()
    rx = t.Raw(rx_app)
    rx.udp, rx.n_packets, rx.base_port, rx.ledger = udp, len(size), base_port, ledger
    rx.Setup(listener)
    rx_node.AddApplication(rx_app)
    rx.SetStartTime(ns.Seconds(0.0))

    tx_app = t.New[t.MediaSender]()
    tx = t.Raw(tx_app)
    tx.udp, tx.first_s, tx.base_port, tx.ledger = udp, job.t0_s + m.start_s, base_port, ledger
    tx.scheduler = 1 if m.scheduler == "intelligent" else 0
    tx.drop_bound_s = -1.0 if m.proactive_drop_s is None else float(m.proactive_drop_s)
    _fill(t, tx.times_s, at, np.float64)
    _fill(t, tx.sizes, size, np.uint32)
    _fill(t, tx.pieces, pieces, np.uint32)
    _fill(t, tx.wire, size + FRAMING_BYTES * pieces, np.uint32)
    sockets = []
    for _ in range(1 if udp else m.connections):
        if udp:
            sock = ns.Socket.CreateSocket(tx_node, ns.UdpSocketFactory.GetTypeId())
        else:
            sock = _tcp_socket(t, tx_node, host_tcp[m.sender], sndbuf=m.sndbuf_bytes, nodelay=m.nodelay)
        tx.AddConnection(sock)
        sockets.append(sock)
    tx.peer = ns.InetSocketAddress(ip_of[m.receiver], m.port).ConvertTo()
    tx_node.AddApplication(tx_app)
    tx.SetStartTime(ns.Seconds(0.0))            # connects first, as the testbed's sender does
    tx.SetStopTime(ns.Seconds(job.t0_s + m.stop_s + DRAIN_S))
    probes = []
    if not udp and job.tcp_state_period_s > 0:
        for c, sock in enumerate(sockets):
            probe_obj = t.New[t.TcpStateProbe]()
            probe = t.Raw(probe_obj)
            probe.flow_id, probe.connection, probe.mss = m.flow_id, c, LINUX_SEGMENT_BYTES
            t.AttachProbeAt(probe_obj, sock, job.tcp_state_period_s, job.t0_s + m.start_s)
            keep.append(probe_obj)
            probes.append(probe)
    parts = {"tx": tx, "rx": rx, "probes": probes, "packets": pk, "pieces": pieces,
             "hold": (tx_app, rx_app, listener, ledger, sockets)}
    keep.append(parts)
    return parts


def _udp_pair(ns, t, node_tx, node_rx, to_ip, port: int, at_s, size_bytes, first_s: float, stop_s: float):
    """A UDP sender (packets at ``first_s + at_s``) and its receiver; returns their raw objects
    and the Ptrs that keep them."""
    listener = ns.Socket.CreateSocket(node_rx, ns.UdpSocketFactory.GetTypeId())
    listener.Bind(ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo())
    rx_app = t.New[t.MediaReceiver]()
    rx = t.Raw(rx_app)
    rx.udp, rx.n_packets = True, len(size_bytes)
    rx.Setup(listener)
    node_rx.AddApplication(rx_app)
    rx.SetStartTime(ns.Seconds(0.0))
    tx_app = t.New[t.MediaSender]()
    tx = t.Raw(tx_app)
    tx.udp, tx.first_s = True, first_s
    _fill(t, tx.times_s, at_s, np.float64)
    _fill(t, tx.sizes, size_bytes, np.uint32)
    tx.Setup(ns.Socket.CreateSocket(node_tx, ns.UdpSocketFactory.GetTypeId()),
             ns.InetSocketAddress(to_ip, port).ConvertTo())     # one socket: connection 0
    node_tx.AddApplication(tx_app)
    tx.SetStartTime(ns.Seconds(0.0))
    tx.SetStopTime(ns.Seconds(stop_s))
    return tx, rx, (tx_app, rx_app, listener)


def _cross(ns, t, job, c, nodes, ip_of, host_tcp, keep):
    first, stop = job.t0_s + c.start_s, job.t0_s + c.stop_s
    if c.transport == "udp":
        interval = c.packet_size_bytes * 8 / c.rate_bps
        at = np.arange(0.0, c.stop_s - c.start_s, interval)
        tx, rx, hold = _udp_pair(ns, t, nodes[c.server], nodes[c.client], ip_of[c.client], c.port, at,
                                 [c.packet_size_bytes] * len(at), first, stop)
        parts = {"tx": tx, "rx": rx, "hold": hold}
        keep.append(parts)
        return parts
    srv_tcp, cli_tcp = host_tcp[c.server], host_tcp[c.client]
    listener = _tcp_socket(t, nodes[c.server], srv_tcp, segment=c.segment_bytes)
    listener.Bind(ns.InetSocketAddress(ns.Ipv4Address.GetAny(), c.port).ConvertTo())
    server_app = t.New[t.ResponseServer]()
    server = t.Raw(server_app)
    for kind, value in c.responses:
        r = t.Response()
        r.kind, r.value = int(kind), float(value)
        server.responses.push_back(r)
    server.segment = int(c.segment_bytes or LINUX_SEGMENT_BYTES)
    server.gap_mean_s, server.stop_s = float(c.gap_mean_s), stop
    server.gaps = t.NewExponential(float(c.gap_mean_s), 1000 + c.flow_id)
    server.max_buffer = int(srv_tcp["sndbuf_bytes"])
    server.flow_id, server.probe_period_s = c.flow_id, job.tcp_state_period_s
    server.mss = int(c.segment_bytes or LINUX_SEGMENT_BYTES)
    server.Setup(listener)
    nodes[c.server].AddApplication(server_app)
    server.SetStartTime(ns.Seconds(0.0))

    maker = _socket_maker(t, nodes[c.client], cli_tcp, segment=c.segment_bytes, rcvbuf=c.rcvbuf_bytes)
    client_app = t.New[t.FetchClient]()
    client = t.Raw(client_app)
    client.server = ns.InetSocketAddress(ip_of[c.server], c.port).ConvertTo()
    client.schedule = int(c.schedule)
    for x in c.starts_s:
        client.starts.push_back(job.t0_s + float(x))
    for x in c.offs_s:
        client.offs.push_back(float(x))
    if c.kind == "transfers":    # a transfer is done when its bytes are read (not at the FIN)
        for _, size in c.responses:
            client.sizes.push_back(float(size))
        client.timeout_s = float(c.timeout_s or 0.0)
    client.first_s, client.end_s = first, stop
    t.UseSocketMaker(client_app, maker)
    nodes[c.client].AddApplication(client_app)
    client.SetStartTime(ns.Seconds(0.0))
    parts = {"server": server, "client": client, "hold": (server_app, client_app, listener, maker)}
    keep.append(parts)
    return parts


# --------------------------------------------------------------------------- results


def t_raw(ptr):
    """The object behind an ns-3 Ptr (see tcpdelay_sim.h, Raw)."""
    return load()[1].Raw(ptr)


def _vec(v, native, dtype=None) -> np.ndarray:
    """A C++ std::vector as a NumPy array (one copy, no per-element calls); ``native`` must be its
    element type (double: float64, int16_t: int16, ...), ``dtype`` what to return."""
    n = int(v.size())
    a = np.frombuffer(v.data(), dtype=native, count=n).copy() if n else np.empty(0, native)
    return a if dtype is None else a.astype(dtype)


def _fill(t, v, values, native) -> None:
    """Fill a std::vector from ``values`` in one call."""
    a = np.ascontiguousarray(values, dtype=native)
    if len(a):
        t.Fill[{np.float64: "double", np.uint32: "uint32_t", np.uint64: "uint64_t"}[native]](v, a, len(a))


def _write_probe(probe, out: Path, tag: str) -> dict:
    if probe is None or len(probe.t_s) == 0:
        return {"rows": 0}
    n = len(probe.t_s)
    ssth = _vec(probe.ssthresh_seg, np.int64)
    pacing = _vec(probe.pacing, np.float64)
    srtt = _vec(probe.srtt, np.float64)
    cols = {
        "flow_id": np.full(n, probe.flow_id, np.int32), "connection": np.full(n, probe.connection, np.int16),
        "time_s": _vec(probe.t_s, np.float64), "cwnd_segments": _vec(probe.cwnd_seg, np.int64),
        "ssthresh_segments": pa.array(ssth, mask=ssth < 0),
        "srtt_s": pa.array(srtt, mask=np.isnan(srtt)), "rttvar_s": pa.nulls(n, pa.float64()),
        "delivery_rate_bps": pa.nulls(n, pa.float64()), "retransmits_total": _vec(probe.retx, np.int64),
        "ca_state": _vec(probe.ca, np.int16, np.int8), "bytes_acked": _vec(probe.acked, np.int64),
        "mss_bytes": np.full(n, probe.mss, np.int32),
        "pacing_rate_bps": pa.array(pacing, mask=np.isnan(pacing) | (pacing == 0)),
        **{f"cc_state_{i}": pa.nulls(n, pa.uint64()) for i in range(4)},
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
    conn = _vec(tx.conn_of, np.int16)[:n_sent]
    skipped = _vec(tx.skipped, np.int16)[:n_sent] > 0
    send = job.t0_s + m.start_s + at
    seq = np.arange(n_sent, dtype=np.int64)
    frame_id = pk["frame_id"][:n_sent] if "frame_id" in pk else np.full(n_sent, -1)
    frame_type = pk["frame_type"][:n_sent] if "frame_type" in pk else np.full(n_sent, "")
    frame_last = pk["frame_last"][:n_sent] if "frame_last" in pk else np.ones(n_sent, bool)
    tag = f"ns3-{m.flow_id}"
    write_part(out, "sent", {"flow_id": np.full(n_sent, m.flow_id, np.int32), "connection": conn,
                             "seq": seq, "size_bytes": size.astype(np.int32), "send_time_s": send,
                             "frame_id": frame_id.astype(np.int64), "frame_type": [str(x) for x in frame_type],
                             "frame_last": frame_last.astype(bool), "dropped": skipped}, writer_id=tag)
    recv = _vec(rx.recv_time_s, np.float64)[:n_sent]
    got = ~np.isnan(recv)
    k = int(got.sum())
    write_part(out, "received", {"flow_id": np.full(k, m.flow_id, np.int32),
                                 "connection": np.where(conn[got] < 0, 0, conn[got]).astype(np.int16),
                                 "seq": seq[got], "size_bytes": size[got].astype(np.int32), "send_time_s": send[got],
                                 "recv_time_s": recv[got]}, writer_id=tag)
    received_bytes = int(size[got].sum())
    last = float(send[-1]) if n_sent else job.t0_s + m.start_s
    n_conn = int(tx.Connections())
    drained = m.transport == "udp" or int(tx.Pending()) == 0
    status = "connection-lost" if tx.failed else ("completed" if drained else "drain-timeout")
    per_conn = [int(tx.PacketsOn(i)) for i in range(n_conn)] if m.transport == "tcp" else [int((~skipped).sum())]
    pieces = parts["pieces"][:n_sent]
    rows = sum(_write_probe(p, out, f"{tag}-{p.connection}")["rows"] for p in parts["probes"])
    sender = {"status": status, "clock": "ns3-simulation", "transport": m.transport, "connections": n_conn,
              "split": m.split, "scheduler": m.scheduler, "packets": n_sent,
              "dropped_packets": int(tx.dropped_packets), "queue_full_packets": int(tx.queue_full_packets),
              "queued_bytes_at_end": int(tx.queued_at_end), "elapsed_s": last - (job.t0_s + m.start_s),
              "duration_s": m.stop_s - m.start_s, "per_connection_packets": per_conn,
              "rtp_packets": int(tx.rtp_packets),
              "wire_bytes": int((size[~skipped] + (FRAMING_BYTES * pieces[~skipped] if m.transport == "tcp" else 0)).sum()),
              "tcp_info_end": [x for p in parts["probes"] for x in _tcp_info_end(p)],
              "tcp_state": {"rows": rows, "connections": len(parts["probes"])}}
    receiver = {"status": "completed", "clock": "ns3-simulation", "received_packets": k,
                "received_bytes": received_bytes, "bytes_in": int(rx.received_bytes),
                "duplicate_packets": 0, "foreign": int(rx.foreign),
                "incomplete_packets": int(((_vec(rx.got_pieces, np.int16)[:n_sent] > 0) & ~got).sum())
                if m.transport == "udp" else 0,
                "keepalive_packets": 0, "media_connections": n_conn,
                "first_recv_time_s": float(np.nanmin(recv)) if got.any() else None,
                "last_recv_time_s": float(np.nanmax(recv)) if got.any() else None}
    return {f"tx:{m.flow_id}": sender, f"rx:{m.flow_id}": [receiver]}


def _cross_results(job: Job, c, parts: dict, out: Path) -> dict:
    start = job.t0_s + c.start_s
    span = c.stop_s - c.start_s
    if c.transport == "udp":
        tx, rx = parts["tx"], parts["rx"]
        sent = int(tx.packets_sent)
        got = np.isfinite(_vec(rx.recv_time_s, np.float64)[:sent])
        seqs = _vec(rx.order, np.uint32, np.int64)
        return {f"cross:{c.flow_id}": {"packets": sent, "bytes": sent * c.packet_size_bytes, "send_errors": 0,
                                       "duration_s": span, "rate_bps": sent * c.packet_size_bytes * 8 / span},
                f"sink:{c.flow_id}": {"packets": int(len(seqs)), "bytes": int(rx.received_bytes),
                                      "highest_seq": int(seqs.max()) if len(seqs) else -1,
                                      "lost": int(sent - got.sum()), "duplicates": int(len(seqs) - got.sum()),
                                      "reordered": int(np.sum(np.diff(seqs) < 0)) if len(seqs) > 1 else 0}}
    server, client = parts["server"], parts["client"]
    n = len(client.bytes)
    conns = []
    for i in range(n):
        rel = [None if v < 0 else v - start for v in (client.connect_s[i], client.first_byte_s[i], client.done_s[i])]
        size = c.responses[i][1] if i < len(c.responses) and c.responses[i][0] == 0 else None
        conns.append({"bytes": int(client.bytes[i]), "size_bytes": None if size is None else int(size),
                      "connect_s": rel[0], "first_byte_s": rel[1], "done_s": rel[2],
                      "complete": bool(client.done_s[i] >= 0 and not client.failed[i]
                                       and (size is None or client.bytes[i] >= size))})
    total = sum(x["bytes"] for x in conns)
    sized = bool(c.responses) and all(r[0] == 0 for r in c.responses)
    complete = all(x["complete"] for x in conns) and n == (len(c.responses) if sized else n)
    rows = 0
    for probe_ptr in server.probes:
        probe = t_raw(probe_ptr)
        rows += _write_probe(probe, out, f"ns3-{c.flow_id}-{probe.connection}")["rows"]
    goodput_span = span
    if c.kind == "bulk":
        # as the testbed's bulk client (traffic/bulk.py) has it: bytes over the time they took to
        # arrive, first byte to the end of the connection — an unlimited transfer is sent until
        # stop_s and what its buffers still hold arrives in the drain after it
        end_rel = job.t0_s + job.duration_s + DRAIN_S - start
        firsts = [x["first_byte_s"] for x in conns if x["first_byte_s"] is not None]
        if firsts:
            goodput_span = max((x["done_s"] if x["done_s"] is not None else end_rel) for x in conns) - min(firsts)
    res = {"kind": c.kind, "bytes": total, "exchanges": n, "failed": int(sum(client.failed)),
           "connections": conns, "goodput_bps": total * 8 / goodput_span if goodput_span > 0 else 0.0,
           "complete": complete if sized else not any(client.failed), "duration_s": span,
           "error": None, "tcp_state": {"rows": rows, "connections": len(server.probes)},
           "warnings": [str(w) for w in server.warnings]}
    if c.kind == "transfers":
        res["transfers"] = _transfer_rows(client, server, start, c)
        res["complete"] = bool(res["transfers"]) and len(res["transfers"]) == len(c.responses) \
            and all(r["complete"] for r in res["transfers"])
    if c.kind == "page_load":
        done = [x["done_s"] for x in conns]
        res["page_load_time_s"] = max(done) if complete and done and None not in done else None
    return {f"cross:{c.flow_id}": res}


def _transfer_rows(client, server, start: float, c) -> list[dict]:
    """A ``transfers`` flow's rows in :func:`tcpdelay.traffic.transfers.merge`'s schema: the
    client's (open, handshake, done, SYNs) joined with the server's timed responses (kind 4) by
    the client's port. ``mss_bytes`` is the server's SegmentSize; with a window clamp,
    ``window_clamp_bytes`` is the client socket's RcvBufSize."""
    from tcpdelay.traffic.transfers import classify

    served = {}
    for i in range(int(server.Served())):
        if int(server.Kind(i)) != 4:
            continue
        w, a = float(server.WriteS(i)), float(server.AckedS(i))
        served[int(server.PeerPort(i))] = {
            "transfer_s": a - w if w >= 0 and a >= 0 else None, "retransmits": int(server.Retransmits(i)),
            "rtos": int(server.Rtos(i)), "recoveries": int(server.Recoveries(i)), "synack_retransmits": None,
            "mss_bytes": int(server.mss), "sent": int(server.Sent(i))}
    rows = []
    for i in range(len(client.bytes)):
        s = served.get(int(client.local_port[i]), {})
        conn, done = float(client.connect_s[i]), float(client.done_s[i])
        row = {"index": i, "open_s": float(client.open_s[i]) - start,
               "handshake_s": conn - float(client.open_s[i]) if conn >= 0 else None,
               "done_s": done - start if done >= 0 else None, "bytes": int(client.bytes[i]),
               "syn_retransmits": max(0, int(client.syns[i]) - 1)}
        for k in ("transfer_s", "retransmits", "rtos", "recoveries", "synack_retransmits", "mss_bytes"):
            row[k] = s.get(k)
        if c.rcvbuf_bytes:
            row["window_clamp_bytes"] = int(c.rcvbuf_bytes)
        row["complete"] = bool(done >= 0 and not client.failed[i] and row["transfer_s"] is not None)
        row["class"] = classify(row["retransmits"], row["rtos"])
        rows.append(row)
    return rows


def _write_queue(channel, out: Path) -> None:
    for index, key in ((0, "a_to_b"), (1, "b_to_a")):
        d = channel.dir[index]
        n = len(d.qs_time_s)
        if n:
            write_part(out, "link_queue", {"direction": pa.array([key] * n), "time_s": _vec(d.qs_time_s, np.float64),
                                           "packets": _vec(d.qs_packets, np.uint32, np.int64),
                                           "bytes": _vec(d.qs_bytes, np.uint64, np.int64)},
                       writer_id=f"ns3-{key}")


def _counters(channel, job: Job, link: dict | None = None) -> dict:
    """A channel's counters in the emulator's format. A direction with a queue discipline takes
    its arrivals, ``queue``/``aqm`` drops and ``ce_marks`` from the queue disc's statistics
    (``QueueDisc::GetStats``, ``CountQdisc`` in cpp/tcpdelay_sim.h) and its ``sojourn_ms`` from
    the queue disc's ``SojournTime`` (enqueue to dequeue); the emulator's ``lateness_us`` and
    mean queue have no counterpart and are absent, as is ``sojourn_ms`` of a drop-tail one."""
    from tcpdelay.sim.aqm import discipline

    out = {"seed": job.seed, "realtime": False}
    for index, key in ((0, "a_to_b"), (1, "b_to_a")):
        d = channel.dir[index]
        name = discipline((link or {}).get(key, {}))
        packets_in, bytes_in, queue, aqm, marks = int(d.packets_in), int(d.bytes_in), int(d.drop_queue), 0, 0
        if name != "drop_tail":
            c = _qdisc_counts(d.qdisc)
            packets_in, bytes_in = int(c.received), int(c.received_bytes)
            queue, aqm, marks = int(c.drop_queue), int(c.drop_aqm), int(c.marks)
        drops = {"loss": int(d.drop_loss), "queue": queue, "aqm": aqm, "outage": int(d.drop_outage),
                 "memory": 0, "oversize": 0, "write_error": 0}
        drops["total"] = sum(drops.values())
        out[key] = {"packets_in": packets_in, "bytes_in": bytes_in, "packets_out": int(d.delivered),
                    "bytes_out": int(d.delivered_bytes), "drops": drops, "peak_queue_packets": int(d.peak_packets),
                    "peak_queue_bytes": int(d.peak_bytes), "in_flight_packets": 0,
                    "queue_discipline": name, "ce_marks": marks}
        if name != "drop_tail":
            out[key]["sojourn_ms"] = _sojourn_ms(_vec(d.sojourn_s, np.float64))
    return out


def _qdisc_counts(qdisc):
    """A queue disc's counters (``CountQdisc``)."""
    return load()[1].CountQdisc(qdisc)


def _sojourn_ms(sojourn_s: np.ndarray) -> dict:
    """The emulator's ``sojourn_ms`` summary (count, mean, p50, p90, p99, max) of the queue
    disc's sojourn times; exact quantiles (the emulator's come from 50-us bins)."""
    if not len(sojourn_s):
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    ms = sojourn_s * 1e3
    p50, p90, p99 = np.quantile(ms, [0.5, 0.9, 0.99])
    return {"count": int(len(ms)), "mean": float(ms.mean()), "p50": float(p50), "p90": float(p90),
            "p99": float(p99), "max": float(ms.max())}


def warm_up() -> float:
    """Run a one-second job that uses every part once, so that cppyy compiles every binding the
    simulations call (seconds of JIT on first use). The worker does this before it forks: its
    children inherit the compiled code instead of compiling it again each. Returns the seconds."""
    import shutil
    import tempfile

    from tcpdelay.sim.job import CrossJob, HostTcp, MediaJob

    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="tcpdelay-ns3-warm-"))
    try:
        np.savez(work / "p.npz", at_s=np.arange(10) * 0.02, size_bytes=np.full(10, 200, np.int64))
        tcp = HostTcp().__dict__
        hosts = [{"name": "l", "side": "left", "tcp": tcp}, {"name": "r", "side": "right", "tcp": tcp}]
        media = [MediaJob(0, "l", "r", "tcp", 20000, 0.0, 0.5, str(work / "p.npz"), connections=2,
                          scheduler="intelligent", split=2, proactive_drop_s=1.0),
                 MediaJob(1, "l", "r", "udp", 20001, 0.0, 0.5, str(work / "p.npz"), split=2)]
        cross = [CrossJob(2, "bulk", "tcp", "l", "r", 30002, 0.0, 1.0, responses=[[3, 0]], starts_s=[0.0]),
                 CrossJob(3, "web_onoff", "tcp", "l", "r", 30003, 0.0, 1.0, responses=[[1, 0.05]] * 3, schedule=1,
                          offs_s=[0.05] * 3, segment_bytes=512),
                 CrossJob(4, "page_load", "tcp", "l", "r", 30004, 0.0, 1.0, responses=[[0, 10_000]] * 2,
                          starts_s=[0.1, 0.1]),
                 CrossJob(5, "udp", "udp", "l", "r", 40000, 0.0, 1.0, rate_bps=1e5)]
        trace = work / "t.trace"
        trace.write_text("1\n2\n")
        link = {"a_to_b": {"delay_s": 0.01, "rate_bps": 1e7, "queue_packets": 100,
                           "loss": {"model": "gilbert_elliott", "p": 0.01, "r": 0.5},
                           "outages": [{"at_s": 0.5, "duration_s": 0.1}]},
                "b_to_a": {"delay_s": 0.01, "trace_file": str(trace), "loss": {"model": "bernoulli", "p": 0.01}}}
        simulate(Job(seed=1, duration_s=1.0, t0_s=0.1, link=link, hosts=hosts, out_dir=str(work / "out"),
                     media=media, cross=cross, tcp_state_period_s=0.1, queue_period_s=0.1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return time.monotonic() - t0


def run_job_file(path: str | os.PathLike) -> dict:
    """Run the job in a JSON file (the worker's child does this)."""
    return simulate(Job.from_dict(json.loads(Path(path).read_text())))
