"""The source interface shared with the sender (``tcpdelay.transport``).

A source is a pure schedule: it says *when* the application emits each packet and how big it
is; the transport decides how it travels. Sources with frames (video) also say which frame a
packet belongs to, so the receiver-side metrics can rebuild frames (see
:mod:`tcpdelay.metrics.video`).
"""

from __future__ import annotations

from typing import Iterator, NamedTuple, Protocol, runtime_checkable

from tcpdelay.errors import ParameterError

#: RTP fixed header (RFC 3550 §5.1), counted in every ``Packet.size_bytes``.
RTP_HEADER_BYTES = 12
#: Smallest media packet: the transport carries a 20-byte media header (sequence number, send
#: time, piece) after the RTP header (``tcpdelay.transport.framing``), so 12 + 20 bytes. Sources
#: refuse smaller packet sizes and pad the last piece of a small frame up to this.
MIN_PACKET_BYTES = 32


class Packet(NamedTuple):
    """One application packet."""

    at_s: float
    """Offset from the start of the flow at which the application emits it."""
    size_bytes: int
    """Application packet size including the 12-byte RTP header (the RFC 4571 2-byte length
    prefix is added by the TCP transport and not counted here)."""
    frame_id: int = -1
    """Index of the video frame this packet carries a piece of; -1 for frameless sources."""
    frame_type: str = ""
    """"I", "P" or "B" for video, "" otherwise."""
    frame_last: bool = True
    """Last packet of its frame (True for frameless sources)."""


@runtime_checkable
class Source(Protocol):
    """What the sender needs from a source."""

    name: str
    nominal_interval_s: float
    """Packet interval while active (VoIP: 0.02; video: the frame interval 1/fps)."""

    def packets(self, duration_s: float, seed: int) -> Iterator[Packet]:
        """Packets in non-decreasing ``at_s``, all with ``at_s < duration_s``; the same for the
        same ``seed``."""
        ...


class PreparedSource:
    """``source``'s packets for one ``duration_s`` and ``seed``, computed now.

    A source computes its schedule when asked (the MPEG-4 TES source imports SciPy and draws its
    frame sizes then): a sender started at a run's start instant would start late by that much,
    and twenty at once on a busy machine by seconds. A sender prepares its source before the
    start instant and sends from this. The other attributes are the source's.
    """

    def __init__(self, source: Source, duration_s: float, seed: int):
        self.source = source
        self.duration_s = duration_s
        self.seed = seed
        self._packets = tuple(source.packets(duration_s, seed))

    def __getattr__(self, name: str):
        if name in ("source", "duration_s", "seed", "_packets"):      # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.source, name)

    def packets(self, duration_s: float, seed: int) -> Iterator[Packet]:
        if (duration_s, seed) != (self.duration_s, self.seed):
            raise ParameterError(f"this source was prepared for duration_s={self.duration_s!r}, "
                                 f"seed={self.seed!r}, not {duration_s!r}, {seed!r}")
        return iter(self._packets)


def check_packet_bytes(name: str, value: int, *, minimum: int = MIN_PACKET_BYTES) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum or value > 65535:
        raise ParameterError(
            f"{name}: {value!r} must be an integer in [{minimum}, 65535] (bytes incl. the "
            f"{RTP_HEADER_BYTES}-byte RTP header)")
    return int(value)


def split_frame(frame_bytes: int, max_packet_bytes: int) -> list[int]:
    """Packet sizes (RTP header included in each) carrying a frame of ``frame_bytes`` of payload,
    each at most ``max_packet_bytes``: full packets first, the remainder last, padded up to
    :data:`MIN_PACKET_BYTES` (an empty frame is one such packet)."""
    max_payload = max_packet_bytes - RTP_HEADER_BYTES
    full, rest = divmod(max(int(frame_bytes), 0), max_payload)
    sizes = [max_packet_bytes] * full
    if rest or not sizes:
        sizes.append(max(rest + RTP_HEADER_BYTES, MIN_PACKET_BYTES))
    return sizes
