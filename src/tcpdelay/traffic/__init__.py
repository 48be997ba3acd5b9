"""Media sources: the packet schedules a sender emits (``tcpdelay.traffic``).

Every source implements :class:`~tcpdelay.traffic.source.Source`: ``packets(duration_s, seed)``
yields :class:`~tcpdelay.traffic.source.Packet` tuples, deterministic for a seed, in
non-decreasing ``at_s``. Sizes include the 12-byte RTP header; the 2-byte RFC 4571 length
prefix of the TCP transport is not counted.

- :func:`build_source` — the source of a named profile (:mod:`tcpdelay.profiles`), by its kind
- :class:`CbrSource` — constant bit rate (the delay model's profiles)
- :class:`VoipOnOffSource` — talk spurts and silences, exponential on/off
- :class:`VideoTraceSource` — VBR video from a frame-size trace file
- :class:`Mpeg4TesSource` — VBR MPEG-4 video from TES models of the I, P and B frame sizes
"""

from tcpdelay.traffic.cbr import CbrSource
from tcpdelay.traffic.mpeg4_tes import Mpeg4TesSource, TesFrameModel
from tcpdelay.traffic.source import RTP_HEADER_BYTES, Packet, Source
from tcpdelay.traffic.sources import build_source
from tcpdelay.traffic.video_trace import VideoTraceSource, parse_trace
from tcpdelay.traffic.voip import VoipOnOffSource

__all__ = [
    "CbrSource", "Mpeg4TesSource", "Packet", "RTP_HEADER_BYTES", "Source", "TesFrameModel",
    "VideoTraceSource", "VoipOnOffSource", "build_source", "parse_trace",
]
