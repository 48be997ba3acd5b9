"""A simulation job: everything one ns-3 simulation is given, as plain data (JSON-able).

A job is built from a run's plan by :mod:`tcpdelay.experiments.backends.ns3` and run by
:func:`tcpdelay.sim.ns3_runtime.simulate` in a worker. Keys (times in seconds of simulated time;
flows start at ``t0_s + start_s``):

``seed``, ``duration_s``, ``t0_s``, ``tcp_state_period_s`` (0 = off), ``queue_period_s``,
``out_dir`` (where the records and ``result.json`` go), ``link`` (``a_to_b``/``b_to_a``: the
emulator's direction tables, :class:`tcpdelay.link.DirectionSpec` data, outages already shifted
to the link's clock), ``hosts`` (name, side ``left``/``right``, and ``tcp``: :class:`HostTcp`),
``media`` (:class:`MediaJob`) and ``cross`` (:class:`CrossJob`).

What ns-3 3.44 cannot do of a host's TCP is named here, at plan time, every item at once
(:func:`unsupported`; :func:`host_tcp` raises one :class:`~tcpdelay.errors.ParameterError`
listing them): a congestion control it lacks, RACK, TLP, ...; the hosts' ``ecn`` (Linux's
``tcp_ecn``) is TcpSocketBase's ``UseEcn`` (:data:`NS3_USE_ECN`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tcpdelay.errors import ParameterError

#: tcpdelay's congestion-control names (the kernel's) -> ns-3 3.44 TypeIds. ns-3 has no
#: Westwood (only Westwood+), no Compound, CCP or CCPD (they exist only as tcpdelay's BPF programs).
NS3_CONGESTION: dict[str, str] = {
    "reno": "ns3::TcpLinuxReno", "newreno": "ns3::TcpNewReno", "cubic": "ns3::TcpCubic",
    "bbr": "ns3::TcpBbr", "vegas": "ns3::TcpVegas", "westwood+": "ns3::TcpWestwoodPlus",
    "bic": "ns3::TcpBic", "highspeed": "ns3::TcpHighSpeed", "htcp": "ns3::TcpHtcp",
    "hybla": "ns3::TcpHybla", "illinois": "ns3::TcpIllinois", "scalable": "ns3::TcpScalable",
    "veno": "ns3::TcpVeno", "yeah": "ns3::TcpYeah", "lp": "ns3::TcpLp", "dctcp": "ns3::TcpDctcp",
    "ledbat": "ns3::TcpLedbat",
}
#: A variant's tcpdelay parameters that ns-3's implementation has, by its attribute name.
NS3_CONGESTION_PARAMS: dict[str, dict[str, str]] = {
    "vegas": {"alpha": "Alpha", "beta": "Beta", "gamma": "Gamma"},
}

#: Linux's defaults where ns-3's differ (docs/ns3.md, "TCP as Linux has it"): MSS of a 1500-byte
#: MTU with timestamps, IW10 (RFC 6928), RTO_min 200 ms, delayed-ACK timeout 40 ms (the kernel's
#: TCP_ATO_MIN), SACK on, the maxima of tcp_wmem / tcp_rmem as fixed buffers (ns-3 does not
#: autotune), the kernel's default congestion control.
LINUX_SEGMENT_BYTES = 1448
LINUX_INITCWND_SEGMENTS = 10
LINUX_MIN_RTO_S = 0.2
LINUX_DELACK_TIMEOUT_S = 0.04
LINUX_WMEM_MAX_BYTES = 4 * 1024 * 1024
LINUX_RMEM_MAX_BYTES = 6 * 1024 * 1024
#: net.ipv4.tcp_ecn's default (accept ECN when the peer asks, never ask): a host that does not
#: set ``ecn`` (ns-3's own default is Off, which would refuse a peer that asks)
LINUX_TCP_ECN = 2
DEFAULT_CONGESTION = "cubic"


#: What to say once after naming congestion controls ns-3 lacks.
NS3_CONGESTION_HINT = f"ns-3 3.44 has: {', '.join(sorted(NS3_CONGESTION))}"


def _congestion_problems(name: str, params: dict | None) -> list[str]:
    if name not in NS3_CONGESTION:
        return [f"congestion control {name!r} is not in ns-3 3.44"]
    known = NS3_CONGESTION_PARAMS.get(name, {})
    return [f"congestion control {name!r}: parameter {k!r} has no ns-3 counterpart"
            + (f" (it has: {', '.join(known)})" if known else " (ns-3's takes none)")
            for k in (params or {}) if k not in known]


def ns3_congestion(name: str | None, params: dict | None = None) -> tuple[str, dict[str, float]]:
    """The ns-3 TypeId and attributes of a congestion control; one line naming what ns-3 has
    when it lacks it (and every parameter it has no counterpart for)."""
    name = name or DEFAULT_CONGESTION
    problems = _congestion_problems(name, params)
    if problems:
        raise ParameterError("; ".join(problems) + f" ({NS3_CONGESTION_HINT})")
    known = NS3_CONGESTION_PARAMS.get(name, {})
    return NS3_CONGESTION[name], {known[k]: v for k, v in (params or {}).items()}


#: Host-wide settings ns-3 3.44 has nothing for: (key, what it lacks and the setting that avoids it).
NS3_LACKS: tuple[tuple[str, str], ...] = (
    ("rack", "rack: ns-3 3.44 has no RACK (set rack = false)"),
    ("tlp", "tlp: ns-3 3.44 has no tail loss probe (set tlp = false)"),
)

#: Linux's ``tcp_ecn`` -> ns-3's ``TcpSocketBase::UseEcn`` (TcpSocketState::UseEcn_t): 0 Off,
#: 1 On (ask for ECN and accept it), 2 AcceptOnly (accept it when the peer asks, Linux's default).
NS3_USE_ECN: dict[int, str] = {0: "Off", 1: "On", 2: "AcceptOnly"}


def unsupported(settings: dict) -> list[str]:
    """Everything of a host's TCP settings (:class:`tcpdelay.testbed.TcpSettings` data) that ns-3
    cannot run, one phrase each, all of them (empty: ns-3 runs it)."""
    out = _congestion_problems(settings.get("congestion_control") or DEFAULT_CONGESTION,
                               settings.get("congestion_params"))
    return out + [why for key, why in NS3_LACKS if settings.get(key)]


@dataclass
class HostTcp:
    """A host's TCP as ns-3 gets it (see the Linux defaults above)."""
    congestion_type: str = NS3_CONGESTION[DEFAULT_CONGESTION]
    congestion_attrs: dict[str, float] = field(default_factory=dict)
    initcwnd_segments: int = LINUX_INITCWND_SEGMENTS
    sack: bool = True
    sndbuf_bytes: int = LINUX_WMEM_MAX_BYTES
    rcvbuf_bytes: int = LINUX_RMEM_MAX_BYTES
    #: Linux's tcp_ecn (0, 1, 2: :data:`NS3_USE_ECN`)
    ecn: int = LINUX_TCP_ECN


def host_tcp(settings: dict) -> HostTcp:
    """A testbed host's TCP settings (:class:`tcpdelay.testbed.TcpSettings` data) for ns-3;
    everything ns-3 cannot do of them is one :class:`ParameterError` (:func:`unsupported`)."""
    problems = unsupported(settings)
    if problems:
        raise ParameterError("; ".join(problems))
    ctype, cattrs = ns3_congestion(settings.get("congestion_control"), settings.get("congestion_params"))
    wmem, rmem = settings.get("wmem_bytes"), settings.get("rmem_bytes")
    return HostTcp(congestion_type=ctype, congestion_attrs=cattrs,
                   initcwnd_segments=int(settings.get("initcwnd_segments") or LINUX_INITCWND_SEGMENTS),
                   sack=settings.get("sack", True) is not False,
                   sndbuf_bytes=int(wmem[2]) if wmem else LINUX_WMEM_MAX_BYTES,
                   rcvbuf_bytes=int(rmem[2]) if rmem else LINUX_RMEM_MAX_BYTES,
                   ecn=LINUX_TCP_ECN if settings.get("ecn") is None else int(settings["ecn"]))


def approximations(settings: dict) -> list[str]:
    """What a host asks for that ns-3 does not do, where the difference is confined to a case
    (said once per run, in environment.json and on stderr, rather than refused)."""
    out = []
    if settings.get("slow_start_after_idle"):
        out.append("no restart after idle (RFC 2861 / tcp_slow_start_after_idle): differs only when a "
                   "connection idles longer than its RTO, e.g. VoIP with silences")
    if settings.get("no_metrics_save") is False:
        out.append("no TCP metrics cache (ssthresh inherited by the next connection to the same host): "
                   "differs only for connections opened after an earlier one ended, e.g. web on/off")
    return out


@dataclass
class MediaJob:
    """A media flow: its packets (``packets_file``: an .npz of ``at_s``, ``size_bytes``) from
    ``sender`` to ``receiver`` over ``transport``."""
    flow_id: int
    sender: str
    receiver: str
    transport: str                      # tcp | udp
    port: int
    start_s: float
    stop_s: float
    packets_file: str
    nodelay: bool = True
    sndbuf_bytes: int | None = None
    rcvbuf_bytes: int | None = None
    #: Brosh et al. Sec. 7-8: split-N, N parallel connections and their scheduler, proactive drop
    split: int = 1
    connections: int = 1
    scheduler: str = "blind"
    proactive_drop_s: float | None = None


@dataclass
class CrossJob:
    """A cross-traffic flow. TCP kinds are request/response as on the testbed
    (:mod:`tcpdelay.traffic.response_server`): the client on the receiving side opens
    connections to the server on the sending side, each answered with the next of
    ``responses`` — ``[kind, value]``: 0 = ``value`` bytes, 1 = as fast as TCP takes them for
    ``value`` s, 2 = ``segment_bytes`` messages at exponential gaps (mean ``gap_mean_s``) until
    stop, 3 = as fast as TCP takes them until stop, 4 = ``value`` bytes timed (the last byte's
    ACK, retransmissions, RTOs, fast recoveries: :mod:`tcpdelay.traffic.transfers`). ``schedule`` 0 opens one connection at each
    of ``starts_s``; 1 opens them one after another, the next ``offs_s[k]`` after the k-th closed
    (web on/off). UDP (``transport`` udp): ``packet_size_bytes`` datagrams at ``rate_bps``."""
    flow_id: int
    kind: str
    transport: str
    server: str
    client: str
    port: int
    start_s: float
    stop_s: float
    responses: list[list[float]] = field(default_factory=list)
    schedule: int = 0
    starts_s: list[float] = field(default_factory=list)
    offs_s: list[float] = field(default_factory=list)
    segment_bytes: int | None = None
    gap_mean_s: float = 0.05
    rate_bps: float = 0.0
    packet_size_bytes: int = 1200
    #: transfers: a connection not done this long after it opened is given up (0: never)
    timeout_s: float = 0.0
    #: the client's receive buffer (bytes), which is the most ns-3 advertises: the scenario's
    #: tcp.window_clamp_bytes (None: the host's)
    rcvbuf_bytes: int | None = None


@dataclass
class Job:
    seed: int
    duration_s: float
    t0_s: float
    link: dict
    hosts: list[dict]
    out_dir: str
    media: list[MediaJob] = field(default_factory=list)
    cross: list[CrossJob] = field(default_factory=list)
    tcp_state_period_s: float = 0.01
    queue_period_s: float = 0.01
    #: every device's MTU (bytes): no IP fragmentation of segments up to mtu_bytes - 40
    mtu_bytes: int = 1500

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Job":
        return cls(**{**d, "media": [MediaJob(**m) for m in d.get("media", [])],
                      "cross": [CrossJob(**c) for c in d.get("cross", [])]})
