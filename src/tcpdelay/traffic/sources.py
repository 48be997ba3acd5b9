"""A media source by profile name: the one builder of sources (``tcpdelay send``, scenario runs).

:func:`build_source` looks the profile up in the table of :mod:`tcpdelay.profiles` and hands it
to the builder registered for its kind (``cbr``, ``voip-onoff``, ``mpeg4-tes``,
``video-trace``), with what the flow adds: size and interval overrides of a CBR profile, the
mean rate of MPEG-4 video, the trace file and frame rate of video, talk spurts for a voice
profile. A source's packets count the 12-byte RTP header but not the 2-byte RFC 4571 prefix that
the profile sizes include (``MediaProfile.packet_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tcpdelay.errors import ParameterError
from tcpdelay.profiles import PROFILES, RFC4571_PREFIX_BYTES, MediaProfile, get_profile
from tcpdelay.traffic.cbr import CbrSource
from tcpdelay.traffic.mpeg4_tes import Mpeg4TesSource
from tcpdelay.traffic.source import Source
from tcpdelay.traffic.video_trace import VideoTraceSource
from tcpdelay.traffic.voip import VoipOnOffSource


@dataclass(frozen=True)
class SourceRequest:
    """What a flow adds to its profile (None: the profile's value, or the source's default)."""

    size_bytes: int | None = None
    """CBR/on-off: bytes per packet as the profiles count them (RFC 4571 prefix included)."""
    interval_s: float | None = None
    """CBR/on-off: packet interval (s)."""
    rate_bps: float | None = None
    """MPEG-4 TES: the mean video rate (b/s)."""
    trace: str | None = None
    """Video trace: the frame-size trace file."""
    fps: float | None = None
    """Video: frames per second."""
    on_off: bool = False
    """A voice profile in exponential talk spurts and silences (means 1.0 s / 1.35 s)."""


@dataclass(frozen=True)
class _Builder:
    build: Callable[[MediaProfile, SourceRequest], Source]
    takes: frozenset[str]          # the SourceRequest fields this kind uses


BUILDERS: dict[str, _Builder] = {}
"""kind -> its builder (see :data:`tcpdelay.profiles.KINDS`)."""


def _register(kind: str, *takes: str):
    def deco(fn: Callable[[MediaProfile, SourceRequest], Source]):
        BUILDERS[kind] = _Builder(fn, frozenset(takes))
        return fn
    return deco


def _cbr_size_interval(prof: MediaProfile, req: SourceRequest) -> tuple[int, float]:
    """The packet size (without the RFC 4571 prefix) and interval, overrides applied."""
    size = req.size_bytes or prof.size_bytes
    return size - RFC4571_PREFIX_BYTES, req.interval_s or prof.interval_s


@_register("cbr", "size_bytes", "interval_s", "on_off")
def _cbr(prof: MediaProfile, req: SourceRequest) -> Source:
    packet_bytes, interval_s = _cbr_size_interval(prof, req)
    if req.on_off:
        if not prof.talk_spurts:
            voices = ", ".join(p.name for p in PROFILES.values() if p.talk_spurts)
            raise ParameterError(f"profile {prof.name!r}: talk spurts (on_off) apply to {voices}")
        return VoipOnOffSource(packet_bytes, interval_s, name=f"{prof.name}-onoff")
    return CbrSource(packet_bytes, interval_s, name=prof.name)


@_register("voip-onoff", "size_bytes", "interval_s", "on_off")
def _voip_onoff(prof: MediaProfile, req: SourceRequest) -> Source:
    packet_bytes, interval_s = _cbr_size_interval(prof, req)
    return VoipOnOffSource(packet_bytes, interval_s, name=prof.name)


@_register("mpeg4-tes", "rate_bps", "fps")
def _mpeg4_tes(prof: MediaProfile, req: SourceRequest) -> Source:
    if req.rate_bps is None:
        raise ParameterError(f"profile {prof.name!r} needs rate_bps (the mean video rate)")
    return Mpeg4TesSource(req.rate_bps, **({"fps": req.fps} if req.fps is not None else {}),
                          name=prof.name)


@_register("video-trace", "trace", "fps")
def _video_trace(prof: MediaProfile, req: SourceRequest) -> Source:
    if req.trace is None:
        raise ParameterError(f"profile {prof.name!r} needs trace (a frame-size trace file)")
    return VideoTraceSource(req.trace, **({"fps": req.fps} if req.fps is not None else {}),
                            name=prof.name)


def build_source(profile: str | None, *, size_bytes: int | None = None, interval_s: float | None = None,
                 rate_bps: float | None = None, trace: str | None = None, fps: float | None = None,
                 on_off: bool = False) -> Source:
    """The source of profile ``profile`` (a name of :data:`tcpdelay.profiles.PROFILES`), or with
    ``profile=None`` a custom CBR source of ``size_bytes`` (RFC 4571 prefix included) every
    ``interval_s``, named "cbr". The other arguments are those of :class:`SourceRequest`; one the
    profile's kind does not use is refused (ParameterError), as is an unknown name.
    """
    req = SourceRequest(size_bytes=size_bytes, interval_s=interval_s, rate_bps=rate_bps,
                        trace=trace, fps=fps, on_off=on_off)
    if profile is None:
        if size_bytes is None or interval_s is None or rate_bps is not None or trace is not None \
                or fps is not None or on_off:
            raise ParameterError("give a profile, or size_bytes and interval_s (only) for a custom "
                                 "CBR source")
        return CbrSource(size_bytes - RFC4571_PREFIX_BYTES, interval_s)
    prof = get_profile(profile)
    builder = BUILDERS[prof.kind]
    given = {k for k in ("size_bytes", "interval_s", "rate_bps", "trace", "fps", "on_off")
             if getattr(req, k) not in (None, False)}
    extra = sorted(given - builder.takes)
    if extra:
        raise ParameterError(f"profile {prof.name!r} ({prof.kind}) takes no {', '.join(extra)}")
    return builder.build(prof, req)
