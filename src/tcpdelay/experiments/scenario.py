"""The scenario file: one experiment as validated data (flent style: a test is declarative data).

A scenario is a TOML file describing *what* to run — the path, the media flows, the cross
traffic, how long, how often, which metrics — and nothing about *how*: no namespace, interface
or process names, so another backend than the testbed (:mod:`tcpdelay.experiments.run`, the only
one today) could run the same file. The format is documented in ``docs/experiments/README.md``;
``experiments/*.toml`` are examples.

Every problem is one line naming the file and the bad key, e.g.::

    scenario.toml: flows[1].profile: 'voip2' is not one of voip, voip-low, ...

raised as :class:`tcpdelay.errors.ParameterError` (exit status 2 on the command line).

A ``[sweep]`` table declares parameter grids: each key is a dotted path into the scenario
(``"path.loss.p"``, ``"flows[0].profile"``) and each value a list; the cells of the sweep are the
Cartesian product (:func:`expand`). Every cell is validated when the file is loaded, so a sweep
never fails half way on a typo.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import tomllib
from pathlib import Path as FsPath
from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from tcpdelay.errors import ParameterError
from tcpdelay.link import (  # noqa: F401  (the loss models, re-exported under the scenario's names)
    BernoulliLoss,
    DelaySeconds,
    DirectionSpec,
    GilbertElliottLoss,
    JitterSeconds,
    KnownKeys,
    LossSpec,
    NoLoss,
    Outage,
    QueueBytes,
    QueuePackets,
    RateBps,
    as_part,
)
from tcpdelay.profiles import PROFILES as MEDIA_PROFILES

# --------------------------------------------------------------------------- vocabularies

#: Media profile names: the table of :data:`tcpdelay.profiles.PROFILES` (the CBR sources of
#: Brosh et al. §5, ``audio-16k`` of the HSPA audio study, ``voip-onoff`` with talk spurts,
#: ``mpeg4-tes`` (needs ``rate_bps``) and ``video-trace`` (needs ``trace``)).
PROFILES: tuple[str, ...] = tuple(MEDIA_PROFILES)

#: TCP presets (the testbed's :data:`tcpdelay.testbed.spec.PRESETS`): the paper-era stack and
#: today's Linux defaults.
TCP_PRESETS = ("newreno-2008", "linux-default")

#: Metrics a scenario may ask for: what ``tcpdelay report`` shows (see
#: :mod:`tcpdelay.report.shown_metrics`); every one is computed from the per-packet records by
#: tcpdelay.metrics whatever the scenario lists.
METRICS = (
    "delay",        # mean, std, percentiles, max of one-way delay
    "late",         # late fraction against playout delay
    "jitter",       # RFC 3550 interarrival jitter
    "loss",         # network loss
    "quality",      # loss-period quality levels (HSPA audio study) 0-5
    "rtpi",         # Real-Time Performance Index (Papadimitriou and Tsaoussidis), delayed packets rate
    "goodput",
    "fairness",     # Jain's index across flows
    "playout",      # picture discards (Watanabe et al.) and buffer underflows
    "mos",          # ITU-T G.107 E-model
    "tcp",          # retransmissions and TCP_INFO samples
)
DEFAULT_METRICS = ("delay", "late", "loss")

MAX_DURATION_S = 86_400.0
_UNION_TAGS = {"none", "bernoulli", "gilbert_elliott", "bulk", "web_onoff", "page_load", "transfers", "udp", "http_video"}


class _Strict(KnownKeys):
    """Unknown keys are errors that list the allowed ones; values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Seconds = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
PositiveSeconds = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]

# --------------------------------------------------------------------------- the path


# The loss models and outage windows are the link's own (:mod:`tcpdelay.link`); a direction's keys
# and limits are the link's, with ``trace`` for the emulator's ``trace_file`` and every key
# optional (resolved per direction, see :meth:`Path.direction`).
Loss = LossSpec


class Direction(_Strict):
    """One direction of the path. Every key is optional: unset keys come from the ``[path]``
    table (the defaults for both directions), then from the built-in defaults (no delay, no
    loss, no rate limit, the backend's default queue, no outages)."""

    delay_s: DelaySeconds | None = None
    jitter_s: JitterSeconds | None = None
    reorder: bool | None = None
    loss: Loss | None = None
    rate_bps: RateBps | None = None
    trace: str | None = None
    queue_packets: QueuePackets | None = None
    queue_bytes: QueueBytes | None = None
    outages: tuple[Outage, ...] | None = None

    @model_validator(mode="after")
    def _exclusive(self):
        if self.rate_bps is not None and self.trace is not None:
            raise ValueError("rate_bps and trace are exclusive: give at most one")
        if self.queue_packets is not None and self.queue_bytes is not None:
            raise ValueError("queue_packets and queue_bytes are exclusive: give at most one")
        return self


DEFAULT_MTU_BYTES = 1500


class Path(Direction):
    """The path between the two sides. Keys given here apply to both directions; ``forward``
    (the direction of the media, sender -> receiver) and ``reverse`` (its ACKs) override them.
    ``rtt_s`` is a shortcut for ``delay_s = rtt_s / 2`` each way."""

    rtt_s: Annotated[float, Field(ge=0.0, le=120.0, allow_inf_nan=False)] | None = None
    mtu_bytes: Annotated[int, Field(ge=MIN_MTU_BYTES, le=MAX_MTU_BYTES)] | None = None
    """The path MTU (bytes) of every interface and of the emulated link; unset: 1500."""
    forward: Direction = Field(default_factory=Direction)
    reverse: Direction = Field(default_factory=Direction)

    @model_validator(mode="after")
    def _rtt(self):
        if self.rtt_s is not None and self.delay_s is not None:
            raise ValueError("rtt_s and delay_s are exclusive: give the RTT or the one-way delay")
        return self

    def direction(self, which: Literal["forward", "reverse"]) -> DirectionSpec:
        """``forward`` or ``reverse`` with the path-wide keys filled in: the link's own
        :class:`~tcpdelay.link.DirectionSpec` (the scenario's ``trace`` is its ``trace_file``;
        outages in seconds from the run's start, see :meth:`~tcpdelay.link.DirectionSpec.later`)."""
        out: dict[str, Any] = {"delay_s": self.rtt_s / 2} if self.rtt_s is not None else {}
        return _resolved(out, (self, getattr(self, which)), {"rtt_s", "mtu_bytes", "forward", "reverse"})

    @property
    def mtu(self) -> int:
        """The path MTU in bytes (``mtu_bytes``, default 1500)."""
        return DEFAULT_MTU_BYTES if self.mtu_bytes is None else int(self.mtu_bytes)


def _resolved(out: dict[str, Any], levels: tuple[Direction, ...], exclude: set[str]) -> DirectionSpec:
    """``out`` with each level's keys laid over it in turn (the scenario's ``trace`` is the link's
    ``trace_file``): the link's :class:`~tcpdelay.link.DirectionSpec`."""
    for level in levels:
        given = level.model_dump(exclude_none=True, exclude=exclude)
        # rate/trace and queue_packets/queue_bytes are each one choice: a level that makes it
        # replaces the other's choice.
        for group in (("rate_bps", "trace"), ("queue_packets", "queue_bytes")):
            if any(k in given for k in group):
                for k in group:
                    out.pop("trace_file" if k == "trace" else k, None)
        for key in given:
            out["trace_file" if key == "trace" else key] = getattr(level, key)
    return DirectionSpec(**out)


class Access(Direction):
    """Every host's own access link into its side's router (papers/004 Fig 1: each source and
    each sink reaches the shared bottleneck through a link of its own). Keys here apply to every
    access link; ``left`` (the side that sends forward flows) and ``right`` override them per
    side; each applies to both directions of a link (papers/004's packet errors hit the sinks'
    links both ways). With ``[access]`` every flow gets a sending host and a receiving host of
    its own, each with its own link and loss process."""

    left: Direction = Field(default_factory=Direction)
    right: Direction = Field(default_factory=Direction)

    def side(self, which: Literal["left", "right"]) -> DirectionSpec:
        """The access link of a host on side ``which`` (the same both ways)."""
        return _resolved({}, (self, getattr(self, which)), {"left", "right"})


# --------------------------------------------------------------------------- TCP and heuristics


#: IPv4 + TCP headers and the timestamp option a data segment carries besides its payload.
MSS_OVERHEAD_BYTES = 52
#: The smallest payload per segment tcp.mss_bytes takes (Linux's TCP_MIN_MSS, 88, less 12).
MIN_MSS_BYTES = 76
#: The path MTU's bounds (the testbed's: 576 to 9000 bytes).
MIN_MTU_BYTES, MAX_MTU_BYTES = 576, 9000
#: Per-socket TCP keys only the ``transfers`` cross kind applies.
TRANSFERS_ONLY_TCP_KEYS = ("mss_bytes", "window_clamp_bytes")


class Tcp(_Strict):
    """TCP settings of a flow: a ``preset`` with overrides on top. Host-wide knobs (SACK, RACK,
    TLP, window validation after idle, metrics caching, initial window) and per-socket knobs
    (congestion control, Nagle, TCP_NOTSENT_LOWAT, buffer sizes) are listed together; a backend
    applies each where it belongs."""

    preset: str | None = None
    congestion_control: str | dict[str, Any] | None = None
    """A name (``cubic``, ``vegas``: ``tcpdelay cc list``) or a table with the variant's
    parameters, ``{name = "vegas", alpha = 1, beta = 3}``."""
    initcwnd_segments: Annotated[int, Field(ge=1, le=1000)] | None = None
    sack: bool | None = None
    rack: bool | None = None
    tlp: bool | None = None
    slow_start_after_idle: bool | None = None
    no_metrics_save: bool | None = None
    ecn: Annotated[int, Field(ge=0, le=2)] | None = None
    nodelay: bool | None = None
    notsent_lowat_bytes: Annotated[int, Field(ge=1, le=2**31 - 1)] | None = None
    sndbuf_bytes: Annotated[int, Field(ge=1024, le=2**31 - 1)] | None = None
    rcvbuf_bytes: Annotated[int, Field(ge=1024, le=2**31 - 1)] | None = None
    mss_bytes: Annotated[int, Field(ge=MIN_MSS_BYTES, le=MAX_MTU_BYTES - MSS_OVERHEAD_BYTES)] | None = None
    """The most payload bytes a data segment carries (the MSS as papers/001 counts it: payload
    per segment, TCP/IP headers and options not included). Linux: ``TCP_MAXSEG`` of
    ``mss_bytes + 12`` (the timestamp option, which Linux subtracts) on both sockets of a
    connection, set before connect/listen, so each SYN advertises it; ns-3: ``SegmentSize``.
    It must fit ``path.mtu_bytes`` with 52 bytes of IP, TCP and timestamp headers. ``transfers``
    only."""
    window_clamp_bytes: Annotated[int, Field(ge=1024, le=2**30)] | None = None
    """The largest window the receiver advertises (papers/001's ``W_max`` times the MSS). Linux:
    ``TCP_WINDOW_CLAMP`` on the receiving socket (the transfers client), set before connect so
    the SYN's window already respects it and again after the first read (Linux replaces the
    clamp with what the receive buffer holds at the first segment above 536 bytes), with the
    socket's receive buffer locked at twice the clamp (receive-buffer autotuning would move the
    clamp with the buffer); ns-3: the receiver's ``RcvBufSize`` (ns-3 advertises
    its free receive buffer). Linux rounds the window it advertises down to a multiple of its
    receive MSS, which counts the 12-byte timestamp option: ``W`` whole segments of ``mss_bytes``
    need ``W * (mss_bytes + 12)`` here (``W * mss_bytes`` gives ``W - 1`` on Linux, ``W`` in
    ns-3); the transfers rows report the window in force at the end (``peer_window_last_bytes``)
    and the largest advertised (``peer_window_max_bytes``).
    ``transfers`` only."""

    @field_validator("preset")
    @classmethod
    def _preset(cls, v):
        if v is not None and v not in TCP_PRESETS:
            raise ValueError(f"{v!r} is not one of {', '.join(TCP_PRESETS)}")
        return v

    @field_validator("congestion_control")
    @classmethod
    def _cc(cls, v):
        # Which algorithms exist depends on the kernel; the backend checks availability.
        if v is None:
            return v
        name, params = congestion_choice(v)
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_+]{1,15}", name):
            raise ValueError(f"{name!r} is not a congestion-control name (e.g. reno, cubic, vegas: tcpdelay cc list)")
        from tcpdelay.testbed.congestion import VARIANTS, check_params

        if name in VARIANTS:
            try:
                check_params(name, params)
            except ParameterError as err:
                raise ValueError(str(err)) from None
        elif params:
            raise ValueError(f"{name!r} takes no parameters (a kernel algorithm, not one of {', '.join(VARIANTS)})")
        return v


def congestion_choice(value: str | dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``(name, parameters)`` of a ``congestion_control`` value (a name or a table with ``name``)."""
    if isinstance(value, dict):
        return value.get("name"), {k: x for k, x in value.items() if k != "name"}
    return value, {}


class Heuristics(_Strict):
    """The delay heuristics of Brosh et al. §7-8 (TCP only, except ``split``)."""

    split: Annotated[int, Field(ge=1, le=64)] = 1
    connections: Annotated[int, Field(ge=1, le=32)] = 1
    scheduler: Literal["blind", "intelligent"] = "blind"
    proactive_drop_s: PositiveSeconds | None = None
    keepalive: bool = False


_Direction = Literal["forward", "reverse"]


class Flow(_Strict):
    """A media flow: a ``profile`` (or a custom CBR ``packet_size_bytes`` + ``interval_s``) over
    ``transport``. ``count`` identical flows (distinct sockets) are started; ``direction``
    ``forward`` is the path's forward direction."""

    name: str | None = None
    profile: str | None = None
    packet_size_bytes: Annotated[int, Field(ge=16, le=65_000)] | None = None
    interval_s: Annotated[float, Field(gt=0.0, le=10.0, allow_inf_nan=False)] | None = None
    rate_bps: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] | None = None
    trace: str | None = None
    transport: Literal["tcp", "udp"] = "tcp"
    count: Annotated[int, Field(ge=1, le=200)] = 1
    start_s: Seconds = 0.0
    stop_s: PositiveSeconds | None = None
    direction: _Direction = "forward"
    tcp: Tcp = Field(default_factory=Tcp)
    heuristics: Heuristics = Field(default_factory=Heuristics)

    @field_validator("profile")
    @classmethod
    def _profile(cls, v):
        if v is not None and v not in PROFILES:
            raise ValueError(f"{v!r} is not one of {', '.join(PROFILES)}")
        return v

    @model_validator(mode="after")
    def _source(self):
        p = self.profile
        if p is None:
            if self.packet_size_bytes is None or self.interval_s is None:
                raise ValueError("give a profile, or packet_size_bytes and interval_s for a custom CBR source")
        elif p == "mpeg4-tes" and self.rate_bps is None:
            raise ValueError("profile 'mpeg4-tes' needs rate_bps (the mean video rate)")
        elif p == "video-trace" and self.trace is None:
            raise ValueError("profile 'video-trace' needs trace (a frame-size trace file)")
        if self.rate_bps is not None and p != "mpeg4-tes":
            raise ValueError("rate_bps is for profile 'mpeg4-tes' only (a CBR rate is packet_size_bytes / interval_s)")
        if self.trace is not None and p != "video-trace":
            raise ValueError("trace is for profile 'video-trace' only")
        if p in ("mpeg4-tes", "video-trace") and (self.packet_size_bytes or self.interval_s):
            raise ValueError(f"profile {p!r} takes no packet_size_bytes/interval_s (frames set them)")
        if self.stop_s is not None and self.stop_s <= self.start_s:
            raise ValueError(f"stop_s {self.stop_s:g} must be after start_s {self.start_s:g}")
        h = self.heuristics
        if self.transport == "udp":
            for key, default in (("connections", 1), ("scheduler", "blind"),
                                 ("proactive_drop_s", None), ("keepalive", False)):
                if getattr(h, key) != default:
                    raise ValueError(f"heuristics.{key} needs transport = 'tcp'")
        if h.scheduler == "intelligent" and h.connections < 2:
            raise ValueError("heuristics.scheduler 'intelligent' needs connections >= 2")
        return self

    @property
    def cbr(self) -> tuple[int, float] | None:
        """(packet size in bytes, interval in seconds) for CBR and on/off VoIP sources."""
        if self.profile is None:
            return (self.packet_size_bytes, self.interval_s)
        prof = MEDIA_PROFILES[self.profile]
        if prof.size_bytes is None:         # video: the frames set sizes and times
            return None
        return (self.packet_size_bytes or prof.size_bytes, self.interval_s or prof.interval_s)


# --------------------------------------------------------------------------- cross traffic


class _Cross(_Strict):
    """Common keys: ``count`` flows (0 turns the entry off, handy in a sweep), each starting at
    ``start_s`` plus a uniform random ``start_spread_s`` (drawn per flow from the run's seed),
    stopping at ``stop_s`` (default: the end of the run) or when its work is done."""

    count: Annotated[int, Field(ge=0, le=200)] = 1
    start_s: Seconds = 0.0
    start_spread_s: Seconds = 0.0
    stop_s: PositiveSeconds | None = None
    direction: _Direction = "forward"

    @model_validator(mode="after")
    def _times(self):
        if self.stop_s is not None and self.stop_s <= self.start_s + self.start_spread_s:
            raise ValueError(f"stop_s {self.stop_s:g} must be after the latest start "
                             f"{self.start_s + self.start_spread_s:g}")
        return self


class BulkCross(_Cross):
    """Bulk TCP (FTP-like): ``count`` connections each sending ``size_bytes`` (unset: until the
    flow stops), e.g. the five FTP flows of Brosh et al. §5.3 or the 28 MB download of the HSPA audio study."""

    kind: Literal["bulk"]
    size_bytes: Annotated[int, Field(ge=1)] | None = None
    tcp: Tcp = Field(default_factory=Tcp)


class WebOnOffCross(_Cross):
    """The web traffic of Brosh et al. §5.3 (SRI/ISI generator), in one of two readings
    (:mod:`tcpdelay.traffic.web_onoff`). ``mode = "connections"``: each of ``count`` web flows
    alternates a response of exponentially distributed duration (mean ``on_mean_s``) sent in
    ``packet_size_bytes`` segments over a new TCP connection, and an exponentially distributed
    idle time (mean ``off_mean_s``). ``mode = "poisson"``: one TCP connection per flow carrying
    a ``packet_size_bytes`` message at exponentially distributed intervals (mean
    ``gap_mean_s``)."""

    kind: Literal["web_onoff"]
    mode: Literal["connections", "poisson"] = "connections"
    on_mean_s: PositiveSeconds = 0.05
    off_mean_s: PositiveSeconds = 0.05
    gap_mean_s: Annotated[float, Field(ge=1e-4, le=3600.0, allow_inf_nan=False)] = 0.05
    packet_size_bytes: Annotated[int, Field(ge=64, le=1448)] = 512
    tcp: Tcp = Field(default_factory=Tcp)


class PageLoadCross(_Cross):
    """The page load of the HSPA audio study: ``connections`` parallel TCP connections fetching
    ``total_bytes`` in total, all starting at one instant drawn uniformly from [``start_s``,
    ``start_s + start_spread_s``] (defaults 10-12 s). The initial window is
    ``tcp.initcwnd_segments`` (IW3 or IW10). ``count`` independent page loads."""

    kind: Literal["page_load"]
    connections: Annotated[int, Field(ge=1, le=100)] = 1
    total_bytes: Annotated[int, Field(ge=1)] = 372_000
    start_s: Seconds = 10.0
    start_spread_s: Seconds = 2.0
    tcp: Tcp = Field(default_factory=Tcp)

    @model_validator(mode="after")
    def _split(self):
        if self.total_bytes < self.connections:
            raise ValueError(f"total_bytes {self.total_bytes} is less than one byte per connection")
        return self


class TransfersCross(_Cross):
    """Timed transfers (Cardwell, Savage, Anderson, "Modeling TCP Latency", §III-IV;
    :mod:`tcpdelay.traffic.transfers`): ``transfers`` transfers of ``size_bytes`` each, one
    after another, each on a fresh connection opened ``gap_s`` after the previous one closed (so
    no connection inherits another's window: a fresh connection starts in slow start with
    ``tcp.initcwnd_segments``). Data flows server -> client, so the path's forward loss is the
    paper's ``p_f`` (SYN/ACK and data) and its reverse loss ``p_r`` (SYN). Every transfer's
    handshake time, transfer time, retransmissions, RTOs and papers/001 class go into the
    flow's result (``transfers``). ``count`` independent sequences."""

    kind: Literal["transfers"]
    size_bytes: Annotated[int, Field(ge=1, le=2**31 - 1)]
    transfers: Annotated[int, Field(ge=1, le=100_000)] = 1
    gap_s: Annotated[float, Field(ge=0.0, le=3600.0, allow_inf_nan=False)] = 0.1
    #: A transfer not done this long after its connect() is given up (counted incomplete) and
    #: the next one starts: a stack that abandons a connection must not stall the sequence.
    timeout_s: Annotated[float, Field(gt=0.0, le=86_400.0, allow_inf_nan=False)] = 120.0
    tcp: Tcp = Field(default_factory=Tcp)


class UdpCross(_Cross):
    """Constant-rate UDP background: ``count`` flows of ``rate_bps`` in ``packet_size_bytes``
    datagrams."""

    kind: Literal["udp"]
    rate_bps: Annotated[float, Field(gt=0.0, le=10e9, allow_inf_nan=False)]
    packet_size_bytes: Annotated[int, Field(ge=32, le=1472)] = 1200


Cross = Annotated[Union[BulkCross, WebOnOffCross, PageLoadCross, TransfersCross, UdpCross], Field(discriminator="kind")]
CROSS_KINDS = ("bulk", "web_onoff", "page_load", "transfers", "udp")


# --------------------------------------------------------------------------- pulled streams

#: papers/003 Sec. V: "TCP sender and receiver maximum buffer size: 256Mbytes".
HTTP_TCP_BUFFER_MAX_BYTES = 256 * 1024 * 1024


class VideoFile(_Strict):
    """The H.264 file an HTTP stream serves, made reproducibly by ffmpeg/x264
    (:mod:`tcpdelay.traffic.video_file`; papers/003 Sec. V: 30 fps, 5.24 Mb/s on average,
    10 min 24 s)."""

    duration_s: Annotated[float, Field(gt=0.0, le=3600.0, allow_inf_nan=False)] = 624.0
    rate_bps: Annotated[float, Field(ge=100e3, le=100e6, allow_inf_nan=False)] = 5.24e6
    fps: Annotated[int, Field(ge=1, le=120)] = 30


class HttpVideo(_Strict):
    """A video file pulled over HTTP (papers/003): a real HTTP server (nginx) on the sending side
    serves it to a player on the receiving side, ``model`` (traffic/http_player.py: logs every
    frame, discards and underflows computed from the log) or ``vlc`` (VLC headless, its own
    counters). ``tcp`` is the server's (its congestion control above all); both ends' TCP
    buffers may grow to ``tcp_buffer_max_bytes`` (tcp_rmem/tcp_wmem maxima)."""

    kind: Literal["http_video"]
    name: str | None = None
    video: VideoFile = Field(default_factory=VideoFile)
    player: Literal["model", "vlc"] = "model"
    playout_buffer_bytes: Annotated[int, Field(ge=1024, le=2**31 - 1)] = 656_000
    #: After a freeze: ``rebuffer`` (wait for ``rebuffer_bytes``, default half the playout buffer,
    #: then go on late) or ``skip`` (never move the clock, skip what is late): docs/video-over-http.md.
    catch_up: Literal["rebuffer", "skip"] = "rebuffer"
    rebuffer_bytes: Annotated[int, Field(ge=1)] | None = None
    direction: _Direction = "forward"
    start_s: Seconds = 0.0
    tcp: Tcp = Field(default_factory=Tcp)
    tcp_buffer_max_bytes: Annotated[int, Field(ge=65536, le=2**31 - 1)] = HTTP_TCP_BUFFER_MAX_BYTES


Stream = Annotated[Union[HttpVideo], Field(discriminator="kind")]
STREAM_KINDS = ("http_video",)


# --------------------------------------------------------------------------- the scenario


#: The sampling period of the TCP state when a scenario does not say (s).
DEFAULT_TCP_STATE_PERIOD_S = 0.01


class Scenario(_Strict):
    """One experiment. ``seeds`` (or ``seed, seed+1, ...`` for ``repetitions`` runs) seed the
    loss processes and the random sources of each repetition."""

    name: str | None = None
    description: str = ""
    duration_s: Annotated[float, Field(gt=0.0, le=MAX_DURATION_S, allow_inf_nan=False)]
    repetitions: Annotated[int, Field(ge=1, le=1000)] | None = None
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 1
    seeds: tuple[Annotated[int, Field(ge=0, le=2**63 - 1)], ...] | None = None
    path: Path = Field(default_factory=Path)
    #: Per-host access links (papers/004's topology); unset: hosts reach the bottleneck directly.
    access: Access | None = None
    flows: tuple[Flow, ...] = ()
    cross: tuple[Cross, ...] = ()
    #: Streams a client pulls (papers/003's video over HTTP). A scenario has flows, streams or
    #: cross traffic (cross traffic alone: papers/004 §4.1's FTP-only reference).
    streams: tuple[Stream, ...] = ()
    metrics: tuple[str, ...] = DEFAULT_METRICS
    sweep: dict[str, Any] = Field(default_factory=dict)
    #: TCP state over time: every TCP flow's TCP_INFO sampled this often into the run's
    #: ``tcp_state`` records (docs/metrics.md); 0 = off; unset = 0.01 s (DEFAULT_TCP_STATE_PERIOD_S).
    tcp_state_period_s: Annotated[float, Field(ge=0.0, le=60.0, allow_inf_nan=False)] | None = None

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, v):
        for m in v:
            if m not in METRICS:
                raise ValueError(f"{m!r} is not one of {', '.join(METRICS)}")
        return v

    @model_validator(mode="after")
    def _check(self):
        if self.seeds is not None:
            if len(set(self.seeds)) != len(self.seeds):
                raise ValueError("seeds: repeated seeds would repeat a run")
            if self.repetitions is not None and self.repetitions != len(self.seeds):
                raise ValueError(f"repetitions {self.repetitions} does not match the {len(self.seeds)} seeds; give one of them")
        for i, f in enumerate(self.flows):
            if f.stop_s is not None and f.stop_s > self.duration_s:
                raise ValueError(f"flows[{i}].stop_s {f.stop_s:g} is after duration_s {self.duration_s:g}")
            if f.start_s >= self.duration_s:
                raise ValueError(f"flows[{i}].start_s {f.start_s:g} is not before duration_s {self.duration_s:g}")
        if not self.flows and not self.streams and not any(c.count for c in self.cross):
            raise ValueError("a scenario needs at least one of flows, streams or cross traffic")
        for i, st in enumerate(self.streams):
            if st.start_s >= self.duration_s:
                raise ValueError(f"streams[{i}].start_s {st.start_s:g} is not before duration_s {self.duration_s:g}")
        for i, c in enumerate(self.cross):
            last = c.start_s + c.start_spread_s
            if c.count and last >= self.duration_s:
                raise ValueError(f"cross[{i}] starts at {last:g} s, not before duration_s {self.duration_s:g}")
        self._check_tcp_keys()
        names = [f.name for f in self.flows if f.name is not None]
        if len(set(names)) != len(names):
            raise ValueError("flow names must be unique")
        return self

    def _check_tcp_keys(self) -> None:
        """Per-socket keys only ``transfers`` applies are refused elsewhere (never ignored), and
        an MSS must fit the path MTU with its headers."""
        tables = [(f"flows[{i}].tcp", f.tcp, None) for i, f in enumerate(self.flows)]
        tables += [(f"cross[{i}].tcp", getattr(c, "tcp", None), c.kind) for i, c in enumerate(self.cross)]
        tables += [(f"streams[{i}].tcp", st.tcp, st.kind) for i, st in enumerate(self.streams)]
        mtu = self.path.mtu
        for where, tcp, kind in tables:
            if tcp is None:
                continue
            for key in TRANSFERS_ONLY_TCP_KEYS:
                if getattr(tcp, key) is not None and kind != "transfers":
                    what = f"kind {kind!r}" if kind else "a media flow"
                    raise ValueError(f"{where}.{key}: only cross kind 'transfers' applies it ({what} would ignore it)")
            if tcp.mss_bytes is not None and tcp.mss_bytes + MSS_OVERHEAD_BYTES > mtu:
                raise ValueError(f"{where}.mss_bytes: {tcp.mss_bytes} + {MSS_OVERHEAD_BYTES} bytes of headers does "
                                 f"not fit path.mtu_bytes {mtu}; raise path.mtu_bytes to at least "
                                 f"{tcp.mss_bytes + MSS_OVERHEAD_BYTES}")

    @property
    def seed_list(self) -> tuple[int, ...]:
        """The seed of each repetition."""
        if self.seeds is not None:
            return tuple(self.seeds)
        return tuple(self.seed + i for i in range(self.repetitions or 1))

    def flow_name(self, index: int) -> str:
        return self.flows[index].name or f"flow{index}"

    def to_data(self) -> dict:
        """Plain data (no ``None``: TOML has no null) that :func:`parse_scenario` reads back to
        an equal scenario."""
        data = self.model_dump(mode="json", exclude_none=True)
        for key in ("sweep", "streams"):      # empty: left out, so older scenarios keep their cell ids
            if not data.get(key):
                data.pop(key, None)
        return data


# --------------------------------------------------------------------------- loading


def format_loc(loc: tuple) -> str:
    """``('flows', 1, 'profile')`` -> ``flows[1].profile`` (union tags are left out)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _UNION_TAGS or str(part).startswith("function-"):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _message(err: ValidationError) -> str:
    e = err.errors(include_url=False)[0]
    loc = format_loc(tuple(e["loc"]))
    typ = e["type"]
    given = e.get("input")
    if typ == "literal_error":
        allowed = re.findall(r"'([^']*)'", e["ctx"]["expected"])
        msg = f"{given!r} is not one of {', '.join(allowed)}"
    elif typ == "union_tag_invalid":
        allowed = re.findall(r"'([^']*)'", e["ctx"]["expected_tags"])
        msg = f"{e['ctx']['tag']!r} is not one of {', '.join(allowed)}"
        loc = f"{loc}.{e['ctx']['discriminator'].strip(chr(39))}" if loc else loc
    elif typ == "union_tag_not_found":
        msg = f"missing key {e['ctx']['discriminator']}"
    elif typ == "missing":
        msg = "missing (required)"
    elif typ == "too_short":
        msg = f"needs at least {e['ctx']['min_length']} entry"
    elif typ in ("model_type", "model_attributes_type", "dict_type"):
        msg = f"{given!r} must be a table"
    elif typ in ("tuple_type", "list_type"):
        msg = f"{given!r} must be a list"
    else:
        msg = e["msg"].removeprefix("Value error, ")
        if typ not in ("value_error", "assertion_error") and given is not None and not isinstance(given, (dict, list)):
            msg = f"{given!r}: {msg[0].lower()}{msg[1:]}"
    return f"{loc}: {msg}" if loc else msg


def _resolve_files(scenario: Scenario, base_dir: FsPath | None, source: str) -> Scenario:
    """Make trace paths absolute (relative to the scenario file) and check they exist."""
    if base_dir is None:
        return scenario
    data = scenario.to_data()

    def fix(holder: dict, where: str) -> None:
        if "trace" in holder:
            if not str(holder["trace"]).strip():
                raise ParameterError(f"{source}: {where}.trace: empty path; give a trace file")
            p = FsPath(holder["trace"])
            p = p if p.is_absolute() else (base_dir / p)
            if p.is_dir():
                raise ParameterError(f"{source}: {where}.trace: '{holder['trace']}' is a directory, not a trace file")
            if not p.is_file():
                raise ParameterError(f"{source}: {where}.trace: file '{holder['trace']}' does not exist")
            holder["trace"] = str(p.resolve())

    path = data.get("path", {})
    fix(path, "path")
    for d in ("forward", "reverse"):
        fix(path.get(d, {}), f"path.{d}")
    access = data.get("access") or {}
    fix(access, "access")
    for side in ("left", "right"):
        fix(access.get(side, {}), f"access.{side}")
    for i, f in enumerate(data["flows"]):
        fix(f, f"flows[{i}]")
    # The sweep's values too: a key ending in ".trace" (each value a path), or a value that is a
    # table holding "trace" (e.g. "flows[0]" = [{..., trace = "..."}] or "path.forward" = [...]).
    for key, values in (data.get("sweep") or {}).items():
        if not isinstance(values, list):
            continue            # _validate has said what is wrong
        for j, v in enumerate(values):
            where = f"[sweep] {key!r}, value {j + 1}"
            if isinstance(v, str) and any(k.rsplit(".", 1)[-1] == "trace" for k in linked_keys(key, source)):
                holder = {"trace": v}
                fix(holder, where)
                values[j] = holder["trace"]
            elif isinstance(v, dict):
                _fix_tables(v, where, fix)
    return _validate(data, source)


def _fix_tables(table: dict, where: str, fix) -> None:
    """``fix`` every table inside ``table`` (itself included) that holds a ``trace``."""
    fix(table, where)
    for k, v in table.items():
        if isinstance(v, dict):
            _fix_tables(v, f"{where}.{k}", fix)


def _validate(data: dict, source: str) -> Scenario:
    try:
        with as_part():  # the link's models report through the scenario's messages
            return Scenario.model_validate(data)
    except ValidationError as err:
        raise ParameterError(f"{source}: {_message(err)}") from None


def parse_scenario(data: dict, *, source: str = "scenario", base_dir: str | None = None,
                   sweep: bool = True) -> Scenario:
    """A :class:`Scenario` from plain data (a parsed TOML table). ``source`` names the file in
    messages; ``base_dir`` is where relative trace paths are looked up. Every cell of the sweep
    is validated too, unless ``sweep`` is false (``tcpdelay run``, which ignores the sweep: its
    grid is then neither expanded nor checked)."""
    if not isinstance(data, dict):
        raise ParameterError(f"{source}: a scenario is a table of keys")
    base = _resolve_files(_validate(data, source), FsPath(base_dir) if base_dir else None, source)
    if not sweep:
        return base
    for overrides in grid(base, source=source):
        cell_data = apply_overrides(base.to_data(), overrides, source=source)
        cell_data.pop("sweep", None)
        where = source + " [sweep: " + ", ".join(f"{k} = {_show(v)}" for k, v in overrides.items()) + "]"
        _validate(cell_data, where)
    return base


def load_scenario(path: str | FsPath, *, sweep: bool = True) -> Scenario:
    """Read and validate a scenario file (TOML); with ``sweep`` false its ``[sweep]`` grid is
    left unexpanded (see :func:`parse_scenario`)."""
    p = FsPath(path)
    if p.is_dir():
        raise ParameterError(f"{p}: is a directory, not a scenario file")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ParameterError(f"{p}: no such scenario file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ParameterError(f"{p}: cannot read: {err}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ParameterError(f"{p.name}: not valid TOML: {err}") from None
    return parse_scenario(data, source=p.name, base_dir=str(p.parent), sweep=sweep)


def dump_scenario(scenario: Scenario) -> str:
    """The scenario as TOML text (what a run writes next to its records)."""
    import tomli_w

    return tomli_w.dumps(scenario.to_data())


# --------------------------------------------------------------------------- sweeps

MAX_SWEEP_CELLS = 10_000
"""The most cells a ``[sweep]`` grid may have. Every cell is validated when the file is loaded
and each is a real-time run; a larger grid is refused at once, naming its size, rather than
expanded for minutes."""

_KEY_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")


def _split_key(key: str, source: str) -> list[str | int]:
    parts: list[str | int] = []
    for piece in key.split("."):
        if piece.isdigit():
            parts.append(int(piece))
            continue
        m = _KEY_PART.fullmatch(piece)
        if not m:
            raise ParameterError(f"{source}: sweep key {key!r}: {piece!r} is not a key (use e.g. \"path.loss.p\" or \"flows[0].profile\")")
        parts.append(m.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    return parts


def apply_overrides(data: dict, overrides: dict[str, Any], *, source: str = "scenario") -> dict:
    """A deep copy of ``data`` with each dotted key set (missing tables are created; a list
    index must exist). A key of several dotted keys joined by ``&`` sets each of them to the
    one value: ``"flows[0].tcp.congestion_control & cross[0].tcp.congestion_control"`` sweeps
    the media's and the cross traffic's variant together (papers/004 runs both on one variant)."""
    out = copy.deepcopy(data)
    for joined, value in overrides.items():
        for key in linked_keys(joined, source):
            _set_key(out, key, value, source)
    return out


def linked_keys(joined: str, source: str = "scenario") -> list[str]:
    """The dotted keys of a sweep key: one, or several joined by ``&``."""
    keys = [k.strip() for k in joined.split("&")]
    if any(not k for k in keys):
        raise ParameterError(f"{source}: sweep key {joined!r}: an empty key around '&'")
    if len(set(keys)) != len(keys):
        raise ParameterError(f"{source}: sweep key {joined!r}: a key is linked to itself")
    return keys


def _set_key(out: dict, key: str, value: Any, source: str) -> None:
    """Set one dotted ``key`` of ``out`` to a copy of ``value`` in place."""
    parts = _split_key(key, source)
    node: Any = out
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(str(p) for p in parts[: i + 1])
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                have = len(node) if isinstance(node, list) else 0
                raise ParameterError(f"{source}: sweep key {key!r}: there is no element [{part}] "
                                     f"(the scenario has {have})")
            if last:
                node[part] = copy.deepcopy(value)
            else:
                node = node[part]
        else:
            if not isinstance(node, dict):
                raise ParameterError(f"{source}: sweep key {key!r}: {where!r} is not a table")
            if last:
                node[part] = copy.deepcopy(value)
            else:
                nxt = node.get(part)
                if nxt is None:
                    nxt = node[part] = [] if isinstance(parts[i + 1], int) else {}
                node = nxt


def grid(scenario: Scenario, *, source: str = "scenario") -> list[dict[str, Any]]:
    """The overrides of every cell of the sweep, in a stable order (keys in file order, values
    in list order, the last key varying fastest); ``[{}]`` without a sweep."""
    sweep = scenario.sweep
    for key, values in sweep.items():
        if any(k == "sweep" or k.startswith("sweep.") for k in linked_keys(key, source)):
            raise ParameterError(f"{source}: sweep key {key!r}: a sweep cannot sweep itself")
        if not isinstance(values, list) or not values:
            raise ParameterError(f"{source}: sweep.\"{key}\": give a non-empty list of values")
    keys = list(sweep)
    cells = math.prod(len(sweep[k]) for k in keys)
    if cells > MAX_SWEEP_CELLS:
        sizes = " x ".join(str(len(sweep[k])) for k in keys)
        raise ParameterError(f"{source}: [sweep]: the grid has {cells} cells ({sizes}); at most "
                             f"{MAX_SWEEP_CELLS} per scenario (split it into several files)")
    return [dict(zip(keys, combo)) for combo in itertools.product(*(sweep[k] for k in keys))]


def cell_scenario(scenario: Scenario, overrides: dict[str, Any]) -> Scenario:
    """The scenario of one cell: the overrides applied, no sweep left."""
    data = apply_overrides(scenario.to_data(), overrides)
    data.pop("sweep", None)
    return _validate(data, "scenario")


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) else str(value)
    return repr(value) if isinstance(value, str) else str(value)


def describe(overrides: dict[str, Any]) -> str:
    """``path.loss.p=0.01 flows[0].profile='video'`` (``base`` without a sweep)."""
    return " ".join(f"{k}={_show(v)}" for k, v in overrides.items()) or "base"
