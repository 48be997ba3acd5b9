"""The plan of one run: a scenario and a seed in, the hosts, the link and the placement of every
flow out — pure (no process, no file, no root), the same whichever backend runs it.

:func:`plan_run` groups the media and cross-traffic *senders* by their host-wide TCP settings
(congestion control, initial window, SACK, RACK, TLP, ...), one host per group on the sending
side; every receiving end of a side shares one sink host. Forward flows send left -> right (the
link's ``a_to_b``), reverse flows right -> left. Every random process of the run (a media source,
a web flow's on/off draws, a start-time draw) gets its own seed from the run's
(:func:`derive_seed`).

Ports: media flow ``i`` listens on ``MEDIA_PORT + i``; every TCP cross-traffic server on
``CROSS_TCP_PORT`` (a ``transfers`` flow's own server on ``TRANSFER_PORT + flow_id``); the UDP cross-traffic sinks on ``CROSS_UDP_PORT``, ``+1``, ...; pulled stream
``j`` (an HTTP video) is served on ``STREAM_PORT + j`` by its own server host to its own client
host (each with the stream's TCP buffers).

Cross-traffic kinds are looked up by name in :data:`CROSS_KINDS` (kind -> transport), media
sources by profile (:func:`media_source`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from tcpdelay.errors import ParameterError
from tcpdelay.experiments.scenario import DEFAULT_TCP_STATE_PERIOD_S, Flow, HttpVideo, Scenario, Tcp, congestion_choice
from tcpdelay.link import DirectionSpec

#: Seconds from the link's start to the run's t0 when the link's behaviour depends on its clock
#: (outages, a delivery trace): the outages of the scenario (seconds from t0) are shifted by it.
LEAD_S = 2.0
MEDIA_PORT = 20_000
CROSS_TCP_PORT = 30_000
CROSS_UDP_PORT = 40_000
#: A ``transfers`` flow has a server of its own (it times each transfer): on TRANSFER_PORT + flow_id.
TRANSFER_PORT = 31_000
STREAM_PORT = 8_000

#: Cross-traffic kinds by name (the scenario's ``kind``) -> the transport their flow uses.
CROSS_KINDS: dict[str, str] = {"bulk": "tcp", "web_onoff": "tcp", "page_load": "tcp", "transfers": "tcp", "udp": "udp"}

# Host-wide TCP settings of a Tcp table (the rest are per-socket options).
_HOST_KEYS = ("congestion_control", "initcwnd_segments", "sack", "rack", "tlp", "slow_start_after_idle",
              "no_metrics_save", "ecn")


def cross_transport(kind: str) -> str:
    """The transport (``tcp`` or ``udp``) of cross-traffic ``kind``; an unknown kind is a
    :class:`ParameterError` naming the known ones."""
    try:
        return CROSS_KINDS[kind]
    except KeyError:
        raise ParameterError(f"cross kind: {kind!r} is not one of {', '.join(sorted(CROSS_KINDS))}") from None


def derive_seed(seed: int, *parts: Any) -> int:
    """A seed for one random process of a run (a flow's source, a web flow's on/off draws, a
    start-time draw), independent of the others and fixed by the run's seed."""
    digest = hashlib.sha256(("/".join(map(str, (seed, *parts)))).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def host_tcp_settings(tcp: Tcp) -> dict:
    """The host-wide part of a flow's TCP table: the preset with the overrides on top, as
    :class:`tcpdelay.testbed.TcpSettings` fields (None = leave the kernel's value)."""
    from tcpdelay.testbed.spec import TcpSettings, preset

    base = preset(tcp.preset) if tcp.preset else TcpSettings()
    over = {k: getattr(tcp, k) for k in _HOST_KEYS if getattr(tcp, k) is not None}
    if tcp.congestion_control is not None:
        name, params = congestion_choice(tcp.congestion_control)
        over["congestion_control"] = name
        over["congestion_params"] = params or None
    return base.merged(TcpSettings(**over)).model_dump(exclude_none=True)


@dataclass
class MediaPlan:
    """One media flow: where it runs (host names), its port, when (seconds after t0), its seed and
    its source (built when planned; a video trace is read then)."""
    flow_id: int
    name: str
    flow: Flow
    sender: str
    receiver: str
    port: int
    start_s: float
    stop_s: float
    seed: int
    source: Any = None
    """Its :mod:`tcpdelay.traffic` source (:func:`media_source`): packets come from
    ``source.packets(stop_s - start_s, seed)``."""


@dataclass
class CrossPlan:
    """One cross-traffic flow (``cross``: its scenario table); times in seconds after t0."""
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

    @property
    def transport(self) -> str:
        """``tcp`` or ``udp`` (:data:`CROSS_KINDS`)."""
        return cross_transport(self.kind)


@dataclass
class StreamPlan:
    """One pulled stream (``stream``: its scenario table, an :class:`HttpVideo`): the server's and
    the client's hosts, the port, when the client asks (seconds after t0) and when it must stop."""
    flow_id: int
    name: str
    stream: HttpVideo
    server: str
    client: str
    port: int
    start_s: float
    stop_s: float


@dataclass
class RunPlan:
    """Everything a backend needs to run a scenario once (it never reads the scenario itself):
    hosts, the link, every flow, and the run's name, seed, length and timing."""
    hosts: list[dict]                  # HostSpec data
    link: dict                         # LinkSpec data
    media: list[MediaPlan] = field(default_factory=list)
    cross: list[CrossPlan] = field(default_factory=list)
    streams: list[StreamPlan] = field(default_factory=list)
    name: str = ""                     # the scenario's name
    seed: int = 0                      # the run's seed (every flow's own derives from it)
    duration_s: float = 0.0            # the run's length from t0
    timed_link: bool = False           # the link's behaviour depends on its clock (see timed_link)
    lead_s: float = LEAD_S             # with a timed link, t0 is this long after the link's start
    tcp_state_period_s: float = 0.01   # every TCP flow's TCP state sampled this often (s; 0 = off)
    mtu_bytes: int = 1500              # the path MTU (every interface, the emulated link)
    host_kernel: dict | None = None    # guests booting a reference kernel: kernel, side, accel

    def testbed_spec(self, seed: int):
        from tcpdelay.testbed.spec import parse_spec

        return parse_spec({"hosts": self.hosts, "link": self.link, "seed": seed % (2**63),
                           "mtu_bytes": self.mtu_bytes})


def _direction_spec(d: DirectionSpec, lead_s: float) -> dict:
    # The keys given (no nulls): the plan's link data, which the testbed spec reads back.
    return d.later(lead_s).model_dump(mode="json", exclude_none=True)


def timed_link(scenario: Scenario) -> bool:
    """Whether a link's behaviour depends on time since the links started (outages, a delivery
    trace, on the path or an access link): then t0 is :data:`LEAD_S` after the links' start."""
    access = (scenario.access.side("left"), scenario.access.side("right")) if scenario.access else ()
    return _timed(scenario.path.direction("forward"), scenario.path.direction("reverse"), *access)


def _timed(*directions: DirectionSpec) -> bool:
    return any(d.outages or d.trace_file for d in directions)


def plan_run(scenario: Scenario, seed: int, *, lead_s: float = LEAD_S) -> RunPlan:
    """Hosts, link and the placement of every flow (no side effects; see the module doc)."""
    side_of = {"forward": ("left", "right"), "reverse": ("right", "left")}
    groups: dict[tuple[str, str], str] = {}      # (side, settings json) -> host name
    hosts: list[dict] = []
    sinks: dict[str, str] = {}

    # With access links every flow has hosts of its own (each with its own link); without, the
    # senders with the same TCP settings share a host and each side has one sink.
    own_hosts = scenario.access is not None

    def sender_host(side: str, tcp: Tcp | None) -> str:
        settings = host_tcp_settings(tcp) if tcp is not None else {}
        key = (side, json.dumps(settings, sort_keys=True), len(hosts) if own_hosts else 0)
        if key not in groups:
            name = f"{side[0]}tx{sum(1 for s, *_ in groups if s == side)}"
            groups[key] = name
            hosts.append({"name": name, "side": side, "tcp": settings})
        return groups[key]

    def sink_host(side: str) -> str:
        if own_hosts:
            name = f"{side[0]}rx{sum(1 for h in hosts if h['name'].startswith(side[0] + 'rx'))}"
            hosts.append({"name": name, "side": side, "tcp": {}})
            return name
        if side not in sinks:
            sinks[side] = f"{side[0]}rx"
            hosts.append({"name": sinks[side], "side": side, "tcp": {}})
        return sinks[side]

    forward, reverse = scenario.path.direction("forward"), scenario.path.direction("reverse")
    plan = RunPlan(hosts=hosts, link={"a_to_b": _direction_spec(forward, lead_s), "b_to_a": _direction_spec(reverse, lead_s)},
                   name=scenario.name, seed=seed, duration_s=scenario.duration_s,
                   timed_link=timed_link(scenario), lead_s=lead_s, mtu_bytes=scenario.path.mtu,
                   host_kernel=scenario.host_kernel.model_dump() if scenario.host_kernel else None,
                   tcp_state_period_s=DEFAULT_TCP_STATE_PERIOD_S if scenario.tcp_state_period_s is None
                   else scenario.tcp_state_period_s)
    flow_id = 0
    for i, f in enumerate(scenario.flows):
        tx_side, rx_side = side_of[f.direction]
        for k in range(f.count):
            name = scenario.flow_name(i) + (f"#{k}" if f.count > 1 else "")
            plan.media.append(MediaPlan(
                flow_id=flow_id, name=name, flow=f, sender=sender_host(tx_side, f.tcp if f.transport == "tcp" else None),
                receiver=sink_host(rx_side), port=MEDIA_PORT + flow_id, start_s=f.start_s,
                stop_s=f.stop_s if f.stop_s is not None else scenario.duration_s,
                seed=derive_seed(seed, "media", flow_id), source=media_source(f)))
            flow_id += 1
    udp_index = 0
    for j, c in enumerate(scenario.cross):
        tx_side, rx_side = side_of[c.direction]
        transport = cross_transport(c.kind)
        for k in range(c.count):
            spread = c.start_spread_s
            offset = 0.0
            if spread > 0:
                import numpy as np

                offset = float(np.random.default_rng(derive_seed(seed, "cross-start", j, k)).uniform(0.0, spread))
            tcp = getattr(c, "tcp", None)
            server = sender_host(tx_side, tcp)
            port = CROSS_TCP_PORT
            if c.kind == "transfers":
                port = TRANSFER_PORT + flow_id
            if transport == "udp":
                port = CROSS_UDP_PORT + udp_index
                udp_index += 1
            client = sink_host(rx_side)
            if tcp is not None and tcp.ecn == 1:
                # the client opens the connection, and ECN is asked for in the SYN (RFC 3168 §6.1.1):
                # the data's sender asking (tcp_ecn = 1) is not enough, its client must ask too
                next(h for h in hosts if h["name"] == client)["tcp"]["ecn"] = 1
            plan.cross.append(CrossPlan(
                flow_id=flow_id, name=f"cross{j}-{c.kind}" + (f"#{k}" if c.count > 1 else ""), kind=c.kind,
                cross=c, server=server, client=client, port=port,
                start_s=c.start_s + offset, stop_s=c.stop_s if c.stop_s is not None else scenario.duration_s,
                seed=derive_seed(seed, "cross", j, k)))
            flow_id += 1
    for j, st in enumerate(scenario.streams):
        tx_side, rx_side = side_of[st.direction]
        buffers = [4096, 131072, st.tcp_buffer_max_bytes]
        server = f"{tx_side[0]}srv{j}"
        client = f"{rx_side[0]}ply{j}"
        hosts.append({"name": server, "side": tx_side,
                      "tcp": {**host_tcp_settings(st.tcp), "rmem_bytes": buffers, "wmem_bytes": buffers}})
        hosts.append({"name": client, "side": rx_side, "tcp": {"rmem_bytes": buffers, "wmem_bytes": buffers}})
        plan.streams.append(StreamPlan(
            flow_id=flow_id, name=st.name or f"stream{j}", stream=st, server=server, client=client,
            port=STREAM_PORT + j, start_s=st.start_s, stop_s=scenario.duration_s))
        flow_id += 1
    if len([h for h in hosts if h["side"] == "left"]) > 200 or len([h for h in hosts if h["side"] == "right"]) > 200:
        raise ParameterError("the scenario needs more than 200 hosts on one side")
    _check_ports(plan)
    if scenario.access is not None:
        for h in hosts:
            d = _direction_spec(scenario.access.side(h["side"]), lead_s)
            h["access"] = {"a_to_b": d, "b_to_a": d}
            h["access_seed"] = derive_seed(seed, "access", h["name"])
    return plan


def _check_ports(plan: RunPlan) -> None:
    """Every port of the plan is a port (at most 65,535) and no two roles share one: a
    scenario with 200,000 flows passed --dry-run with media ports up to 219,999 (issue 53)."""
    used: dict[int, str] = {}
    n = len(plan.media) + len(plan.cross) + len(plan.streams)

    def claim(port: int, what: str) -> None:
        if port > 65535:
            raise ParameterError(f"the scenario's {n} flows need port {port} for {what}, past 65,535: "
                                 "use fewer flows (or count)")
        if used.get(port, what) != what:
            raise ParameterError(f"the scenario's {n} flows would give port {port} to both {used[port]} "
                                 f"and {what}: use fewer flows (or count)")
        used[port] = what

    for m in plan.media:
        claim(m.port, f"media flow {m.name}")
    for c in plan.cross:
        claim(c.port, "the TCP cross-traffic servers" if c.port == CROSS_TCP_PORT else f"cross flow {c.name}")
    for st in plan.streams:
        claim(st.port, f"stream {st.name}")


def media_source(flow: Flow):
    """The :mod:`tcpdelay.traffic` source of a media flow."""
    from tcpdelay.traffic.sources import build_source

    return build_source(flow.profile, size_bytes=flow.packet_size_bytes, interval_s=flow.interval_s,
                        rate_bps=flow.rate_bps, trace=flow.trace)
