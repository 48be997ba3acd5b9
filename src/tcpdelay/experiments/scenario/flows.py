"""The ``[[flows]]`` tables: media flows (a profile or a custom CBR source) and the delay
heuristics they may use."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from tcpdelay.experiments.scenario.base import FlowDirection, PositiveSeconds, Seconds, StrictTable
from tcpdelay.experiments.scenario.quic import Quic
from tcpdelay.experiments.scenario.tcp import Tcp
from tcpdelay.profiles import PROFILES as MEDIA_PROFILES

#: Media profile names: the table of :data:`tcpdelay.profiles.PROFILES` (the CBR sources of
#: Brosh et al. §5, ``audio-16k`` of the HSPA audio study, ``voip-onoff`` with talk spurts,
#: ``mpeg4-tes`` (needs ``rate_bps``) and ``video-trace`` (needs ``trace``)).
PROFILES: tuple[str, ...] = tuple(MEDIA_PROFILES)


class Heuristics(StrictTable):
    """The delay heuristics of Brosh et al. §7-8 (TCP only, except ``split``)."""

    split: Annotated[int, Field(ge=1, le=64)] = 1
    connections: Annotated[int, Field(ge=1, le=32)] = 1
    scheduler: Literal["blind", "intelligent"] = "blind"
    proactive_drop_s: PositiveSeconds | None = None
    keepalive: bool = False


class Flow(StrictTable):
    """A media flow: a ``profile`` (or a custom CBR ``packet_size_bytes`` + ``interval_s``) over
    ``transport``. ``count`` identical flows (distinct sockets) are started; ``direction``
    ``forward`` is the path's forward direction."""

    name: str | None = None
    profile: str | None = None
    packet_size_bytes: Annotated[int, Field(ge=16, le=65_000)] | None = None
    interval_s: Annotated[float, Field(gt=0.0, le=10.0, allow_inf_nan=False)] | None = None
    rate_bps: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] | None = None
    trace: str | None = None
    transport: Literal["tcp", "udp", "quic-stream", "quic-frame-streams", "quic-datagram"] = "tcp"
    count: Annotated[int, Field(ge=1, le=200)] = 1
    start_s: Seconds = 0.0
    stop_s: PositiveSeconds | None = None
    direction: FlowDirection = "forward"
    tcp: Tcp = Field(default_factory=Tcp)
    heuristics: Heuristics = Field(default_factory=Heuristics)
    quic: Quic = Field(default_factory=Quic)

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
        if self.transport.startswith("quic-") and self.tcp.congestion_control is not None:
            raise ValueError("tcp.congestion_control is the kernel's TCP; a QUIC flow takes "
                             "quic.congestion_control (newreno, cubic)")
        if not self.transport.startswith("quic-") and self.quic != Quic():
            raise ValueError(f"quic needs a quic-* transport (this flow's is {self.transport!r})")
        if self.quic.deadline_s is not None and self.transport not in ("quic-frame-streams", "quic-datagram"):
            raise ValueError("quic.deadline_s needs transport = 'quic-frame-streams' or 'quic-datagram'")
        if self.transport != "tcp":
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
