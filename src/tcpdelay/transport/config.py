"""Configuration of the two ends of a media run (validated at construction).

:class:`SenderConfig` holds everything about a run; the part the receiver needs
(:meth:`SenderConfig.params`) travels in the control hello (:mod:`tcpdelay.transport.control`).
:class:`ReceiverConfig` holds what only the receiving host decides (where it listens, where it
writes, how long it waits).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

from tcpdelay.errors import ParameterError
from tcpdelay.transport.framing import MAX_PIECES, MIN_MEDIA_RTP_BYTES, RFC4571_MAX_BYTES
from tcpdelay.transport.quic_config import QUIC_TRANSPORTS, QuicOptions
from tcpdelay.transport.scheduler import SCHEDULERS
from tcpdelay.transport.sockopts import TcpOptions

TRANSPORTS = ("tcp", "udp") + QUIC_TRANSPORTS
DELIVERIES = ("read", "in-order")
MAX_CONNECTIONS = 64
MAX_DURATION_S = 86_400.0
MAX_PENDING = 4096
# A run id names a directory: matched whole (fullmatch: ``$`` would let a trailing newline
# through), it starts with a letter, digit or underscore (no ".", "..", hidden name or option).
_RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
#: Names a run id may not take: the files and folders a run directory itself holds (with a
#: single run directory they would be the run's own parts; in a per-run parent, confusable).
RESERVED_RUN_IDS = frozenset({"received", "sent", "tcp_state", "quic_state", "playout", "link_queue",
                              "run.json", "flows", "results", "out"})
RUN_ID_RULE = ("1-64 of A-Z a-z 0-9 _ . -, starting with a letter, digit or _, and not one of "
               + ", ".join(sorted(RESERVED_RUN_IDS)))


def run_id_problem(run_id) -> str | None:
    """Why ``run_id`` cannot name a run directory (None: it can)."""
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        return f"run_id {run_id!r:.80} must be {RUN_ID_RULE}"
    if run_id.lower() in RESERVED_RUN_IDS:
        return f"run_id {run_id!r} is reserved (a name of the run directory's own files)"
    return None


def _positive(name: str, value, *, upper: float = math.inf, allow_none: bool = False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value <= upper) \
            or not math.isfinite(value):
        raise ParameterError(f"{name}: {value!r} must be a number in (0, {upper:g}]")


def _int_in(name: str, value, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ParameterError(f"{name}: {value!r} must be an integer in [{lo}, {hi}]")


def check_host_port(name: str, host: str, port: int, *, allow_zero: bool = False) -> None:
    if not isinstance(host, str) or not host or len(host) > 255:
        raise ParameterError(f"{name}: host {host!r} must be a host name or address")
    _int_in(f"{name} port", port, 0 if allow_zero else 1, 65535)


def parse_host_port(name: str, text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPv6]:PORT``."""
    m = re.fullmatch(r"\[([^\]]+)\]:(\d{1,5})|([^:\[\]]+):(\d{1,5})", text or "")
    if not m:
        raise ParameterError(f"{name}: {text!r} is not HOST:PORT (or [IPv6]:PORT)")
    host = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    check_host_port(name, host, port, allow_zero=True)
    return host, port


@dataclass(frozen=True)
class RunParams:
    """What the receiver must know about a run (carried in the hello)."""
    transport: str = "tcp"
    connections: int = 1
    split: int = 1
    duration_s: float = 60.0
    flow_id: int = 0
    delivery: str = "read"
    source: str = ""
    max_packet_bytes: int = RFC4571_MAX_BYTES   # the source's largest RTP packet (CBR: its size)

    def __post_init__(self):
        if self.transport not in TRANSPORTS:
            raise ParameterError(f"transport: {self.transport!r} is not one of {', '.join(TRANSPORTS)}")
        _int_in("connections", self.connections, 1, MAX_CONNECTIONS)
        if self.transport == "udp" and self.connections != 1:
            raise ParameterError("connections: parallel connections need --transport tcp "
                                 "(UDP has no per-connection congestion state to spread over)")
        if self.transport in QUIC_TRANSPORTS and self.connections != 1:
            raise ParameterError("connections: parallel connections need --transport tcp "
                                 "(a QUIC transport is one QUIC connection)")
        _int_in("split", self.split, 1, MAX_PIECES)
        _positive("duration_s", self.duration_s, upper=MAX_DURATION_S)
        _int_in("flow_id", self.flow_id, 0, 2**32 - 1)
        if self.delivery not in DELIVERIES:
            raise ParameterError(f"delivery: {self.delivery!r} is not one of {', '.join(DELIVERIES)}")
        if self.delivery == "in-order" and self.transport != "tcp":
            raise ParameterError("delivery: in-order needs --transport tcp (a lost UDP packet "
                                 "would hold back every later one for ever)")
        if not isinstance(self.source, str) or len(self.source) > 64:
            raise ParameterError("source: must be a name of at most 64 characters")
        _int_in("max_packet_bytes", self.max_packet_bytes, MIN_MEDIA_RTP_BYTES, RFC4571_MAX_BYTES)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data) -> "RunParams":
        if not isinstance(data, dict):
            raise ParameterError("params: must be a JSON object")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ParameterError(f"params: unknown keys {sorted(unknown)}")
        return cls(**data)


@dataclass(frozen=True)
class SenderConfig:
    """A media sender (``tcpdelay send``; :func:`tcpdelay.transport.run_sender`).

    ``to_host``/``to_port``: the receiver's control address. ``scheduler``: "blind" or
    "intelligent" (only matters with ``connections`` > 1). ``proactive_drop_delay_s``: skip a
    packet when the unsent backlog of its connection implies a sender-side delay above this
    bound (TCP only; None = off). ``keepalive``: during silences send 3 small packets per RTT
    on every connection (``keepalive_rtt_s`` is the RTT used until TCP has measured one, and
    always for UDP). ``out_dir``: the run directory for the "sent" records and run.json
    (None = no records). ``drain_timeout_s``: after the last packet, how long to wait for the
    application queues to empty and for the receiver's summary. ``max_queue_bytes``: the
    application queue of a connection never grows beyond this; a packet that would not fit is
    skipped and recorded as dropped (``queue_full_packets``), so a source far above the path's
    capacity cannot exhaust memory. ``tcp_state_period_s``: sample every TCP connection's
    ``TCP_INFO`` this often into the ``tcp_state`` records (0 = off; needs ``out_dir``).
    ``cc_state_map_id``: the id of the ``tdcc_state`` map of the tcpdelay BPF congestion control
    the connections use, whose four published values are then sampled too (None: not one of ours).
    ``quic``: the QUIC transports' options (:class:`~tcpdelay.transport.quic_config.QuicOptions`;
    their state is sampled every ``tcp_state_period_s`` into ``quic_state`` records).
    """
    to_host: str
    to_port: int
    run: RunParams = field(default_factory=RunParams)
    scheduler: str = "blind"
    tcp: TcpOptions = field(default_factory=TcpOptions)
    proactive_drop_delay_s: float | None = None
    keepalive: bool = False
    keepalive_rtt_s: float = 0.1
    seed: int = 0
    out_dir: str | None = None
    run_id: str | None = None
    connect_timeout_s: float = 5.0
    drain_timeout_s: float = 10.0
    max_queue_bytes: int = 64 * 2**20
    tcp_state_period_s: float = 0.01
    cc_state_map_id: int | None = None
    quic: QuicOptions = field(default_factory=QuicOptions)

    def __post_init__(self):
        check_host_port("to", self.to_host, self.to_port)
        if self.keepalive and self.run.transport in QUIC_TRANSPORTS:
            raise ParameterError("keepalive needs --transport tcp or udp (QUIC keeps its own "
                                 "connection alive)")
        if self.quic.deadline_s is not None and self.run.transport not in ("quic-frame-streams", "quic-datagram"):
            raise ParameterError("a QUIC deadline needs --transport quic-frame-streams or quic-datagram "
                                 "(one stream has nothing to reset or drop)")
        if not (isinstance(self.tcp_state_period_s, (int, float)) and 0 <= self.tcp_state_period_s <= 60):
            raise ParameterError(f"tcp_state_period_s: {self.tcp_state_period_s!r} must be in [0, 60] s (0 = off)")
        if self.cc_state_map_id is not None and not (isinstance(self.cc_state_map_id, int)
                                                     and self.cc_state_map_id > 0):
            raise ParameterError(f"cc_state_map_id: {self.cc_state_map_id!r} must be a positive BPF map id")
        if self.scheduler not in SCHEDULERS:
            raise ParameterError(f"scheduler: {self.scheduler!r} is not one of {', '.join(SCHEDULERS)}")
        _positive("proactive_drop_delay_s", self.proactive_drop_delay_s, allow_none=True)
        if self.proactive_drop_delay_s is not None and self.run.transport != "tcp":
            raise ParameterError("proactive drop needs --transport tcp (it reads TCP's unsent backlog)")
        if self.proactive_drop_delay_s is not None and self.run.delivery == "in-order":
            raise ParameterError("proactive drop and in-order delivery exclude each other: a "
                                 "dropped sequence number would hold back every later packet")
        _positive("keepalive_rtt_s", self.keepalive_rtt_s, upper=60)
        _positive("connect_timeout_s", self.connect_timeout_s, upper=3600)
        _positive("drain_timeout_s", self.drain_timeout_s, upper=3600)
        _int_in("seed", self.seed, 0, 2**63 - 1)
        _int_in("max_queue_bytes", self.max_queue_bytes, 65536, 2**40)
        if self.run_id is not None and (problem := run_id_problem(self.run_id)):
            raise ParameterError(problem)


@dataclass(frozen=True)
class ReceiverConfig:
    """A media receiver (``tcpdelay recv``; :func:`tcpdelay.transport.run_receiver`).

    ``listen_port`` 0 picks a free port (reported to ``on_ready``). ``out_dir``: with
    ``runs`` = 1 the run directory itself, otherwise one sub-directory per run (named by the
    run id; ``per_run_dirs`` True/False forces either); None = no records. ``runs``: how many
    runs to serve before returning (0 = until stopped). ``idle_timeout_s``: a run with no bytes
    from the sender for this long ends (and keeps what it recorded). ``handshake_timeout_s``:
    how long an accepted connection has to complete its first control message (a hello or a
    media connection's opening), however slowly it sends. ``max_pending``: how many such
    connections are held at once; one more closes the oldest (:mod:`.pending`).
    ``udp_linger_s``: after the sender's "end", how long UDP media still in flight is awaited
    (and TCP media after a drain timeout, whose resets may be lost).

    Bounds (docs/transport.md "Security"; a run that breaks one during the run ends as
    ``over-limit`` with the bound in ``failure``, one that would break it is refused at its
    hello): ``max_run_duration_s`` (a hello asking for more is refused; a run ends at its
    duration plus the idle timeout and a minute, whatever it receives),
    ``max_runs_per_peer_per_minute`` (hellos accepted from one address in the last 60 s),
    ``max_run_bytes`` / ``max_run_packets`` (read from the sender / RTP packets of a run),
    ``max_control_messages`` (per run, after the hello), ``max_errors_kept`` (error lines kept
    per run; the rest are counted in ``errors_dropped``), ``quic_window_bytes`` (QUIC's flow
    control credit, per connection and per stream, fixed: what one connection may make the
    receiver buffer), ``min_free_disk_bytes`` (a run is refused, or ended, when the output
    folder's file system has less free). One run is served at a time (a hello during a run is
    refused as busy).
    """
    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    out_dir: str | None = None
    per_run_dirs: bool | None = None
    runs: int = 1
    idle_timeout_s: float = 10.0
    handshake_timeout_s: float = 5.0
    udp_linger_s: float = 1.0
    tcp: TcpOptions = field(default_factory=TcpOptions)
    max_message_bytes: int = RFC4571_MAX_BYTES
    max_pending: int = 128
    max_run_duration_s: float = 3600.0
    max_runs_per_peer_per_minute: int = 30
    max_run_bytes: int = 32 * 2**30
    max_run_packets: int = 20_000_000
    max_control_messages: int = 64
    max_errors_kept: int = 100
    quic_window_bytes: int = 8 * 2**20
    min_free_disk_bytes: int = 2**30

    def __post_init__(self):
        check_host_port("listen", self.listen_host, self.listen_port, allow_zero=True)
        _int_in("runs", self.runs, 0, 10**9)
        _positive("idle_timeout_s", self.idle_timeout_s, upper=3600)
        _positive("handshake_timeout_s", self.handshake_timeout_s, upper=3600)
        _positive("udp_linger_s", self.udp_linger_s, upper=3600)
        _int_in("max_message_bytes", self.max_message_bytes, 32, RFC4571_MAX_BYTES)
        _int_in("max_pending", self.max_pending, 1, MAX_PENDING)
        _positive("max_run_duration_s", self.max_run_duration_s, upper=MAX_DURATION_S)
        _int_in("max_runs_per_peer_per_minute", self.max_runs_per_peer_per_minute, 1, 10**6)
        _int_in("max_run_bytes", self.max_run_bytes, 1, 2**50)
        _int_in("max_run_packets", self.max_run_packets, 1, 2**40)
        _int_in("max_control_messages", self.max_control_messages, 1, 10**6)
        _int_in("max_errors_kept", self.max_errors_kept, 1, 10**6)
        _int_in("quic_window_bytes", self.quic_window_bytes, 65536, 2**30)
        _int_in("min_free_disk_bytes", self.min_free_disk_bytes, 0, 2**50)
