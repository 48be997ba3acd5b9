"""The media profiles: one table of every source a flow can name (ground floor, no I/O).

Each profile has a ``kind`` that says which source plays it (the builders are in
:mod:`tcpdelay.traffic.sources`):

- ``cbr``: constant bit rate, ``size_bytes`` every ``interval_s``. The six profiles of Brosh et
  al., *The Delay-Friendliness of TCP for Real-Time Traffic*, §5 (VoIP, interactive video and
  live video at a 20 and a 30 ms packet interval; their working-region criteria of §6.1 are
  added by :mod:`tcpdelay.model.delay.profiles`) and ``audio-16k``, the 16 kb/s audio of the
  HSPA audio study (40-byte payload + RTP every 20 ms).
- ``voip-onoff``: VoIP's packets in exponential talk spurts and silences (means 1.0 s / 1.35 s).
- ``mpeg4-tes``: MPEG-4 video from TES frame-size models; the mean rate is given per flow.
- ``video-trace``: VBR video from a frame-size trace file given per flow.

Sizes are on-the-wire application bytes over TCP: the 12-byte RTP header (RFC 3550 §5.1) and
the 2-byte RFC 4571 length prefix included, so a source's packets are
``size_bytes - RFC4571_PREFIX_BYTES`` bytes (voip: 172 B every 20 ms). The nominal codec rates
exclude both headers; the rate on TCP is ``8 * size_bytes / interval_s``. Video sources have no
fixed size or interval (their frames set them): ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from tcpdelay.errors import ParameterError

#: Bytes of the RFC 4571 length prefix included in a profile's size.
RFC4571_PREFIX_BYTES = 2

#: The kinds of source a profile may be (one builder each in :mod:`tcpdelay.traffic.sources`).
KINDS = ("cbr", "voip-onoff", "mpeg4-tes", "video-trace")


@dataclass(frozen=True)
class MediaProfile:
    """One named media source (see the module docstring for the units)."""

    name: str
    kind: str
    size_bytes: int | None
    """Application bytes per packet over TCP (RTP header + 2-byte RFC 4571 prefix included);
    None when the frames set the sizes."""
    interval_s: float | None
    """Packet interval (s) while active; None when the frame rate sets it."""
    nominal_bps: int | None
    """Codec rate (b/s) without RTP header and framing; None when the flow gives it."""
    description: str = ""
    talk_spurts: bool = False
    """A voice profile: it may also be played in talk spurts and silences (``on_off``)."""
    voice: bool = False
    """Voice or audio (the E-model's MOS and the HSPA study's quality levels apply); else video."""

    @property
    def packet_bytes(self) -> int | None:
        """Bytes of one source packet (RTP header included, RFC 4571 prefix not)."""
        return None if self.size_bytes is None else self.size_bytes - RFC4571_PREFIX_BYTES


PROFILES: Mapping[str, MediaProfile] = {
    p.name: p
    for p in (
        MediaProfile("voip", "cbr", 174, 0.020, 64_000,
                     "voice, 64 kb/s, 160 B + RTP + framing every 20 ms", talk_spurts=True, voice=True),
        MediaProfile("voip-low", "cbr", 174, 0.030, 42_000, "voice, 42 kb/s, every 30 ms",
                     talk_spurts=True, voice=True),
        MediaProfile("ivideo", "cbr", 724, 0.020, 284_000, "interactive video, 284 kb/s, 724 B every 20 ms"),
        MediaProfile("ivideo-low", "cbr", 724, 0.030, 187_000, "interactive video, 187 kb/s, every 30 ms"),
        MediaProfile("video", "cbr", 1448, 0.020, 573_000, "live video, 573 kb/s, one MSS every 20 ms"),
        MediaProfile("video-low", "cbr", 1448, 0.030, 378_000, "live video, 378 kb/s, every 30 ms"),
        MediaProfile("audio-16k", "cbr", 54, 0.020, 16_000,
                     "audio of the HSPA audio study, 16 kb/s, 40 B + RTP every 20 ms", voice=True),
        MediaProfile("voip-onoff", "voip-onoff", 174, 0.020, 64_000,
                     "voice, 64 kb/s every 20 ms in talk spurts and silences (1.0 s / 1.35 s)", voice=True),
        MediaProfile("mpeg4-tes", "mpeg4-tes", None, None, None,
                     "MPEG-4 video from TES frame-size models, at the flow's mean rate"),
        MediaProfile("video-trace", "video-trace", None, None, None,
                     "VBR video from the flow's frame-size trace file"),
    )
}

#: The six constant-bit-rate profiles of Brosh et al. §5, the delay model's (each with a
#: working-region criterion in :mod:`tcpdelay.model.delay.profiles`; ``tcpdelay send --profile``).
DELAY_MODEL_PROFILES: tuple[str, ...] = ("voip", "voip-low", "ivideo", "ivideo-low", "video", "video-low")


def get_profile(name: str) -> MediaProfile:
    """The profile called ``name``; ParameterError naming the known ones if there is none."""
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        raise ParameterError(f"profile: {name!r} is not one of {', '.join(PROFILES)}") from None
